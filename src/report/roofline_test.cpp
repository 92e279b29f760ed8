#include "report/roofline.h"

#include <gtest/gtest.h>

#include "support/html_marks.h"

namespace kforge::report {
namespace {
using nlohmann::json;

// A finished run's result.json: reference 2 ms, best 0.5 ms, 8 MB a call; `flops` and the
// device's numbers as each test needs them.
json result_with(json flops, json device) {
  return {{"flops", std::move(flops)},
          {"bytes_moved", 8e6},
          {"device", std::move(device)},
          {"final", {{"reference", {{"median_ms", 2.0}}}, {"best", {{"median_ms", 0.5}}}}},
          {"profile", nullptr}};
}

size_t marks(const std::string& chart, const std::string& kind) {
  return testing::count_of(chart, "class=\"mark " + kind + "\"");
}

TEST(Roofline, AFlopCountedTaskIsPlacedByIntensityUnderBothRoofs) {
  json result =
      result_with(4e8, {{"copy_bytes_per_s", 1e11}, {"peak_flops_per_s", {{"f32", 1e13}}}});
  // Nsight Compute saw 1.5x the minimum traffic in 0.4 ms over two launches.
  result["profile"] = {
      {"ok", true},
      {"kernels",
       json::array(
           {{{"metrics",
              {{"dram__bytes_read.sum", 8e6},
               {"dram__bytes_write.sum", 2e6},
               {"gpu__time_duration.sum", 3e5}}}},
            {{"metrics", {{"dram__bytes_read.sum", 2e6}, {"gpu__time_duration.sum", 1e5}}}}})}};
  const std::string chart = testing::chart_of(roofline_section(result), "roofline");
  EXPECT_EQ(marks(chart, "reference"), 1u) << chart;
  EXPECT_EQ(marks(chart, "best"), 1u);
  EXPECT_EQ(marks(chart, "profiled"), 1u);
  EXPECT_EQ(testing::count_of(chart, "class=\"line roof\""), 1u);
  EXPECT_EQ(testing::count_of(chart, "class=\"plot-note\""), 0u) << "nothing is missing";
  // 4e8 FLOPs over 8 MB: 50 FLOP/byte; 4e8 / 0.5 ms = 800 GFLOP/s.
  EXPECT_NE(chart.find("best: 800 GFLOP/s at 50 FLOP/byte"), std::string::npos) << chart;
  EXPECT_NE(chart.find("reference: 200 GFLOP/s at 50 FLOP/byte"), std::string::npos);
  EXPECT_NE(chart.find("1000 GFLOP/s over its kernel time at 33.33 FLOP/byte of its measured "
                       "DRAM traffic (1.50x the minimum)"),
            std::string::npos)
      << chart;
  EXPECT_NE(chart.find(">roofline</text>"), std::string::npos);
}

TEST(Roofline, ADeviceWithoutAPeakGetsTheMemoryRoofAndSaysTheComputeRoofIsMissing) {
  const std::string section = roofline_section(result_with(4e8, {{"copy_bytes_per_s", 1e11}}));
  const std::string chart = testing::chart_of(section, "roofline");
  EXPECT_EQ(marks(chart, "reference"), 1u) << chart;
  EXPECT_EQ(marks(chart, "best"), 1u);
  EXPECT_EQ(marks(chart, "profiled"), 0u);
  EXPECT_EQ(testing::count_of(chart, "class=\"line roof\""), 1u);
  EXPECT_EQ(testing::count_of(chart, "class=\"plot-note\""), 1u);
  EXPECT_NE(chart.find("no f32 peak FLOP/s reported by the device: no compute roof"),
            std::string::npos)
      << chart;
}

TEST(Roofline, ATaskWithoutAFlopCountIsPlacedByBandwidthAndSaysWhatIsMissing) {
  const std::string chart = testing::chart_of(
      roofline_section(result_with(nullptr, {{"copy_bytes_per_s", 1e10}})), "roofline");
  EXPECT_EQ(marks(chart, "reference"), 1u) << chart;
  EXPECT_EQ(marks(chart, "best"), 1u);
  EXPECT_EQ(testing::count_of(chart, "class=\"line roof\""), 1u);
  EXPECT_NE(chart.find("best: 16 GB/s on the 8e+06 bytes"), std::string::npos) << chart;
  EXPECT_NE(chart.find("the task counts no FLOPs: no arithmetic intensity, FLOP/s or compute roof"),
            std::string::npos);
  EXPECT_NE(chart.find("memory roof (copy bandwidth)"), std::string::npos);
  EXPECT_EQ(chart.find("GFLOP"), std::string::npos) << "no FLOP/s is made up";
}

TEST(Roofline, WithoutABandwidthNoRoofIsDrawnAndThePlotSaysSo) {
  const std::string chart =
      testing::chart_of(roofline_section(result_with(nullptr, json::object())), "roofline");
  EXPECT_EQ(marks(chart, "reference"), 1u) << chart;
  EXPECT_EQ(marks(chart, "best"), 1u);
  EXPECT_EQ(testing::count_of(chart, "class=\"line roof\""), 0u);
  EXPECT_EQ(testing::count_of(chart, "class=\"plot-note\""), 2u);
  EXPECT_NE(chart.find("no copy bandwidth measured: no memory roof"), std::string::npos);
}

TEST(Roofline, NothingToPlaceIsANoteAndNoFinalRungIsNothing) {
  json result = result_with(nullptr, json::object());
  result["bytes_moved"] = 0;
  const std::string section = roofline_section(result);
  EXPECT_EQ(testing::chart_of(section, "roofline"), "");
  EXPECT_NE(section.find("neither the task's FLOPs nor the bytes it moves"), std::string::npos);
  result["final"] = nullptr;
  EXPECT_EQ(roofline_section(result), "");
}

}  // namespace
}  // namespace kforge::report

#include "report/run_html.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "report/memory_graph.h"
#include "report/search_path.h"
#include "support/html_marks.h"

namespace kforge::report {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class RunHtmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A folder per test: ctest runs the tests of this suite at once, each in its own process.
    dir_ = fs::temp_directory_path() /
           ("kforge_run_html_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "run.json") << json{{"task", "softmax <rows>"}, {"backend", "cpu"},
                                            {"task_path", "/t/task.toml"}, {"steps", 2},
                                            {"seed", 7}, {"policy", "htam"},
                                            {"generator", "templates"}, {"started", "2026-12-05"}};
    std::ofstream events(dir_ / "events.jsonl");
    events << json{{"event", "run_started"}, {"device", "AMD EPYC"}, {"toolchain", "g++ 12"}}.dump()
           << "\n"
           << json{{"event", "reference_timed"}, {"median_ms", 2.0}}.dump() << "\n";
    const char* const* verdicts = verdicts_;
    const double medians[] = {1.0, 0.0, 0.5, 0.0, 0.8};
    for (int i = 0; i < 5; ++i) {
      json e = {{"event", "candidate"}, {"index", i}, {"id", i == 2 ? "<script>x</script>" : "c" + std::to_string(i)},
                {"step", i / 3}, {"verdict", verdicts[i]},
                {"outcome", i == 0 || i == 2 ? "accepted" : "not_better"},
                {"spent_device_s", 1.5 * (i + 1)}};
      e["median_ms"] = medians[i] > 0 ? json(medians[i]) : json();
      events << e.dump() << "\n";
    }
    events << "{\"event\": \"cut by a kill" << "\n";  // a damaged last line is skipped
  }
  void TearDown() override { fs::remove_all(dir_); }

  // finish(), with the final rung's raw samples as a kforge that keeps them writes them.
  void finish_with_samples() {
    finish();
    json result = json::parse(std::ifstream(dir_ / "result.json"));
    result["final"]["reference_rounds_ms"] = {{2.0, 2.1, 1.9}, {2.3, 2.0, 2.0}};
    result["final"]["best_rounds_ms"] = {{0.5, 0.49, 0.6}, {0.5, 0.5, 0.51}};
    std::ofstream(dir_ / "result.json") << result;
  }

  void finish() {
    json best = {{"id", "<script>x</script>"}, {"source", "/elsewhere/best.cpp"},
                 {"full_workload_speedups", json::array({{{"workload", "wide"}, {"speedup", 3.9}},
                                                         {{"workload", "tall"}, {"speedup", 4.1}}})}};
    json candidates = json::array();
    for (int i = 0; i < 5; ++i) {
      // Two expert hints, then three candidates of one direction refining the first hint.
      candidates.push_back({{"rung", i == 2 ? 3 : (i % 2 == 0 ? 2 : 0)},
                            {"id", "v" + std::to_string(i) + "[A=1]"},
                            {"parent", i < 2 ? "" : "v0[A=1]"},
                            {"direction", i < 2 ? "" : "vectorization"},
                            {"strategy", i < 2 ? "" : "simd_" + std::to_string(i)},
                            {"step", i < 2 ? 0 : 1},
                            {"verdict", verdicts_[i]}});
    }
    std::ofstream(dir_ / "result.json") << json{
        {"best", best}, {"candidates", candidates}, {"bytes_moved", 8e6},
        {"device", {{"copy_bytes_per_s", 1e10}}},
        {"final", {{"speedup", {{"speedup", 4.0}, {"ci_low", 3.8}, {"ci_high", 4.2}, {"level", 0.95}}},
                   {"reference", {{"median_ms", 2.0}, {"min_ms", 1.9}, {"max_ms", 2.3}, {"count", 10}}},
                   {"best", {{"median_ms", 0.5}, {"min_ms", 0.49}, {"max_ms", 0.6}, {"count", 10}}}}},
        {"profile", nullptr}};
    std::ofstream(dir_ / "best.cpp") << "int kforge_run() { return a < b; }\n";
  }

  fs::path dir_;
  static constexpr const char* verdicts_[] = {"ok", "wrong_answer", "ok", "compile_error", "ok"};
};

TEST_F(RunHtmlTest, AnUnfinishedRunShowsItsCandidatesAndSaysSo) {
  const std::string page = render_run_html(dir_);
  EXPECT_NE(page.find("not finished: the run was stopped half-way"), std::string::npos);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "by-candidate"), "class=\"mark "), 5u);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "by-device-seconds"), "class=\"mark "), 5u);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "by-candidate"), "class=\"mark wrong_answer\""), 1u);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "funnel"), "class=\"mark bar"), 4u);
  EXPECT_EQ(testing::chart_of(page, "per-workload"), "");  // no best yet
  // Names from the run are text, never markup.
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("softmax &lt;rows&gt;"), std::string::npos);
  // The best-so-far line (from the first accepted candidate on: 5 points, each after the first
  // with its step corner) and the marks' exact numbers in their tooltips.
  const std::string by_candidate = testing::chart_of(page, "by-candidate");
  const size_t line = by_candidate.find("class=\"line best\" points=\"");
  ASSERT_NE(line, std::string::npos) << by_candidate;
  const std::string points = by_candidate.substr(line, by_candidate.find("\"/>", line) - line);
  EXPECT_EQ(testing::count_of(points, ","), 9u) << points;
  EXPECT_NE(by_candidate.find("0.5000 ms, 4.000x, accepted"), std::string::npos);
}

TEST_F(RunHtmlTest, AFinishedRunHasTheBestsChartsAndItsSource) {
  finish();
  const std::string page = render_run_html(dir_);
  EXPECT_NE(page.find("finished: best 4.000x over the reference"), std::string::npos);
  // Two rung-2 workloads and the final rung with its interval.
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "per-workload"), "class=\"mark bar"), 3u);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "per-workload"), "class=\"whisker\""), 1u);
  EXPECT_NE(testing::chart_of(page, "per-workload").find("final rung: 4.000x, 95% CI 3.800-4.200x"),
            std::string::npos);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "timings"), "class=\"mark bar"), 2u);
  // No FLOP count: the roofline's memory side, the reference and the best placed by the
  // bandwidth they achieve, and the plot says what is missing (roofline_test.cpp has the rest).
  const std::string roofline = testing::chart_of(page, "roofline");
  EXPECT_EQ(testing::count_of(roofline, "class=\"mark reference\""), 1u) << roofline;
  EXPECT_EQ(testing::count_of(roofline, "class=\"mark best\""), 1u);
  EXPECT_NE(roofline.find("best: 16 GB/s"), std::string::npos) << roofline;
  EXPECT_NE(roofline.find("the task counts no FLOPs"), std::string::npos);
  // Rungs reached: 5, then 3 at rung 1 (every rung >= 1 candidate)...
  EXPECT_NE(testing::chart_of(page, "funnel").find("rung 3 (final): 1 candidate(s)"), std::string::npos);
  EXPECT_NE(page.find("return a &lt; b;"), std::string::npos);
  // The search's path, laid out by graphviz (scripts/setup installs it): start -> hint v0,
  // start -> hint v1, hint v0 -> vectorization (three candidates, one arrow).
  const size_t graph = page.find("<div class=\"path-graph\">");
  ASSERT_NE(graph, std::string::npos) << page;
  const std::string svg = page.substr(graph, page.find("</svg>", graph) - graph);
  EXPECT_EQ(testing::count_of(svg, "class=\"edge\""), 3u) << svg;
  EXPECT_NE(svg.find("s1 simd_2"), std::string::npos) << svg;
}

TEST_F(RunHtmlTest, TheFinalRoundsRawSamplesArePlottedEachAsAMark) {
  finish_with_samples();
  const std::string chart = testing::chart_of(render_run_html(dir_), "final-samples");
  EXPECT_EQ(testing::count_of(chart, "class=\"mark reference\""), 6u) << chart;
  EXPECT_EQ(testing::count_of(chart, "class=\"mark best\""), 6u) << chart;
  EXPECT_NE(chart.find("reference, round 2, sample 1: 2.3000 ms"), std::string::npos) << chart;
  EXPECT_NE(chart.find("best, round 1, sample 3: 0.6000 ms"), std::string::npos) << chart;
}

TEST_F(RunHtmlTest, ARunWithoutRawSamplesShowsItsSummaryAndSaysTheSamplesAreMissing) {
  finish();  // result.json as kforge wrote it before the samples were kept
  const std::string page = render_run_html(dir_);
  EXPECT_EQ(testing::chart_of(page, "final-samples"), "");
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "timings"), "class=\"mark bar"), 2u);
  EXPECT_NE(page.find("raw samples of the final rounds are not in this run's result.json"),
            std::string::npos);
}

TEST(SearchPathDot, EachCandidateIsAnArrowFromItsParentsDirection) {
  const json candidates = json::array(
      {{{"id", "a[X=1]"}, {"verdict", "ok"}, {"step", 0}},
       {{"id", "b"}, {"parent", "a[X=1]"}, {"direction", "tiling"}, {"strategy", "t1"},
        {"step", 1}, {"verdict", "wrong_answer"}}});
  const std::string dot = search_path_dot(candidates);
  EXPECT_NE(dot.find("\"start\" -> \"hint: a\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"hint: a\" -> \"tiling\" [penwidth=2.0, color=\"#d62728\", label=\"s1 t1\"]"),
            std::string::npos)
      << dot;
}

TEST_F(RunHtmlTest, TheMemorysGraphShowsHalfWayAndBeforeTheSearchPathOnceFinished) {
  EXPECT_EQ(render_run_html(dir_).find("The memory&#39;s graph"), std::string::npos)
      << "no graph and no move recorded: no section";
  std::ofstream(dir_ / kMemoryGraphFile)
      << json{{"backend", "cpu"},
              {"directions", json::array({{{"id", "vectorization"}, {"title", "SIMD"}}})},
              {"edges", json::array()}};
  std::ofstream(dir_ / "events.jsonl", std::ios::app)
      << json{{"event", "step"}, {"step", 1}, {"after", nullptr},
              {"moves", json::array({{{"direction", "vectorization"}, {"strategy", "simd_2"}}})}}
             .dump()
      << "\n";
  const std::string half_way = render_run_html(dir_);
  EXPECT_NE(half_way.find("<div class=\"memory-graph\"><svg"), std::string::npos) << half_way;
  EXPECT_NE(half_way.find("<td>1</td><td>-</td><td>vectorization</td><td>simd_2</td>"),
            std::string::npos);
  finish();
  const std::string page = render_run_html(dir_);
  const size_t memory = page.find("<div class=\"memory-graph\">");
  ASSERT_NE(memory, std::string::npos) << page;
  EXPECT_LT(memory, page.find("<div class=\"path-graph\">"));
  EXPECT_GT(memory, page.find("id=\"per-workload\""));
}

TEST_F(RunHtmlTest, AFailedRunSaysWhyAndANonRunIsRefused) {
  std::ofstream(dir_ / "failed.txt") << "the reference crashed\n";
  EXPECT_NE(render_run_html(dir_).find("failed: the reference crashed"), std::string::npos);
  EXPECT_THROW(render_run_html(dir_ / "nothing"), Error);
  EXPECT_NE(write_run_html(dir_ / "nothing").find("not a kforge run directory"), std::string::npos);
}

}  // namespace
}  // namespace kforge::report

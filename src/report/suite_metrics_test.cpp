#include "report/suite_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"

namespace kforge::report {
namespace {

SuiteTaskOutcome correct(const std::string& name, double speedup, double wall_s = 1.0) {
  SuiteTaskOutcome outcome;
  outcome.name = name;
  outcome.correct = true;
  outcome.speedup = speedup;
  outcome.wall_s = wall_s;
  return outcome;
}

SuiteTaskOutcome failed(const std::string& name, double wall_s = 1.0) {
  SuiteTaskOutcome outcome;
  outcome.name = name;
  outcome.wall_s = wall_s;
  return outcome;
}

// Four tasks worked by hand: speedups 2.0, 0.5, 1.5 (correct) and one failure.
//   fast_0   = 3/4 (every correct task: speedup > 0)
//   fast_1   = 2/4 (2.0 and 1.5)
//   fast_1.5 = 1/4 (2.0 only: exactly 1.5 is not "> 1.5")
//   fast_2   = 0/4 (exactly 2.0 is not "> 2")
//   geomean  = (2.0 * 0.5 * 1.5)^(1/3) = 1.5^(1/3) = 1.1447142...
TEST(SuiteMetrics, FastPAndGeomeanMatchHandComputedValues) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 2.0), correct("b", 0.5), correct("c", 1.5),
                                            failed("d")};
  SuiteMetrics m = compute_suite_metrics(outcomes);
  EXPECT_EQ(m.task_count, 4);
  EXPECT_EQ(m.correct_count, 3);
  EXPECT_DOUBLE_EQ(m.correct_fraction, 0.75);
  ASSERT_EQ(m.fast_p.size(), 4u);
  EXPECT_DOUBLE_EQ(m.fast_p[0].p, 0.0);
  EXPECT_DOUBLE_EQ(m.fast_p[0].fraction, 0.75);
  EXPECT_EQ(m.fast_p[1].count, 2);
  EXPECT_DOUBLE_EQ(m.fast_p[1].fraction, 0.5);
  EXPECT_EQ(m.fast_p[2].count, 1);
  EXPECT_DOUBLE_EQ(m.fast_p[2].fraction, 0.25);
  EXPECT_EQ(m.fast_p[3].count, 0);
  EXPECT_DOUBLE_EQ(m.fast_p[3].fraction, 0.0);
  ASSERT_TRUE(m.geomean_speedup.has_value());
  EXPECT_NEAR(m.geomean_speedup->geomean, 1.1447142425533319, 1e-12);
  EXPECT_EQ(m.geomean_speedup->count, 3);
  // A percentile-bootstrap interval of a mean lies within the values' range and around it.
  EXPECT_GE(m.geomean_speedup->ci_low, 0.5);
  EXPECT_LE(m.geomean_speedup->ci_low, m.geomean_speedup->geomean);
  EXPECT_GE(m.geomean_speedup->ci_high, m.geomean_speedup->geomean);
  EXPECT_LE(m.geomean_speedup->ci_high, 2.0);
  EXPECT_DOUBLE_EQ(m.geomean_speedup->level, 0.95);
}

TEST(SuiteMetrics, SpeedupExactlyAtThresholdDoesNotCount) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 1.0), correct("b", 2.0)};
  EXPECT_EQ(fast_p(outcomes, 1.0).count, 1);
  EXPECT_EQ(fast_p(outcomes, 2.0).count, 0);
  EXPECT_EQ(fast_p(outcomes, 1.9999).count, 1);
}

TEST(SuiteMetrics, NoCorrectTaskHasZeroRatesAndNoGeomean) {
  std::vector<SuiteTaskOutcome> outcomes = {failed("a"), failed("b")};
  outcomes[1].speedup = 5.0;  // an incorrect task's speedup never counts
  SuiteMetrics m = compute_suite_metrics(outcomes);
  EXPECT_EQ(m.correct_count, 0);
  EXPECT_DOUBLE_EQ(m.correct_fraction, 0.0);
  for (const FastP& f : m.fast_p) EXPECT_EQ(f.count, 0) << fast_p_name(f.p);
  EXPECT_FALSE(m.geomean_speedup.has_value());
  EXPECT_TRUE(m.to_json()["geomean_speedup"].is_null());
}

TEST(SuiteMetrics, OneTaskGivesItsOwnSpeedupAndADegenerateInterval) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 1.25)};
  SuiteMetrics m = compute_suite_metrics(outcomes);
  EXPECT_DOUBLE_EQ(m.correct_fraction, 1.0);
  EXPECT_DOUBLE_EQ(m.fast_p[1].fraction, 1.0);
  EXPECT_DOUBLE_EQ(m.fast_p[2].fraction, 0.0);
  ASSERT_TRUE(m.geomean_speedup.has_value());
  EXPECT_NEAR(m.geomean_speedup->geomean, 1.25, 1e-12);
  EXPECT_NEAR(m.geomean_speedup->ci_low, 1.25, 1e-12);
  EXPECT_NEAR(m.geomean_speedup->ci_high, 1.25, 1e-12);
}

TEST(SuiteMetrics, EmptySuiteIsAllZeros) {
  SuiteMetrics m = compute_suite_metrics({});
  EXPECT_EQ(m.task_count, 0);
  EXPECT_DOUBLE_EQ(m.correct_fraction, 0.0);
  EXPECT_DOUBLE_EQ(m.fast_p[0].fraction, 0.0);
  EXPECT_FALSE(m.geomean_speedup.has_value());
  EXPECT_EQ(m.wall_s.reported, 0);
}

TEST(SuiteMetrics, CorrectTaskWithoutAPositiveSpeedupIsAnError) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("broken", 0.0)};
  EXPECT_THROW(geomean_speedup(outcomes), Error);
  outcomes[0].speedup = std::nan("");
  EXPECT_THROW(geomean_speedup(outcomes), Error);
}

TEST(SuiteMetrics, IntervalIsDeterministicForASeed) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 1.1), correct("b", 1.9), correct("c", 0.8),
                                            correct("d", 3.0)};
  std::optional<GeomeanSpeedup> first = geomean_speedup(outcomes);
  std::optional<GeomeanSpeedup> again = geomean_speedup(outcomes);
  ASSERT_TRUE(first && again);
  EXPECT_DOUBLE_EQ(first->ci_low, again->ci_low);
  EXPECT_DOUBLE_EQ(first->ci_high, again->ci_high);
  EXPECT_LT(first->ci_low, first->ci_high);
}

TEST(SuiteMetrics, CostsAreSummedOverTheTasksThatReportThem) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 1.0, 10.0), failed("b", 20.0)};
  outcomes[0].device_s = 4.0;
  outcomes[0].llm_cost_usd = 0.25;
  outcomes[1].llm_cost_usd = 0.75;
  SuiteMetrics m = compute_suite_metrics(outcomes);
  EXPECT_EQ(m.wall_s.reported, 2);
  EXPECT_DOUBLE_EQ(m.wall_s.total, 30.0);
  EXPECT_DOUBLE_EQ(m.wall_s.mean, 15.0);
  EXPECT_EQ(m.device_s.reported, 1);
  EXPECT_DOUBLE_EQ(m.device_s.mean, 4.0);
  EXPECT_DOUBLE_EQ(m.llm_cost_usd.total, 1.0);
  EXPECT_DOUBLE_EQ(m.llm_cost_usd.mean, 0.5);
}

TEST(SuiteMetrics, JsonNamesTheMetricsAsTheFieldDoes) {
  std::vector<SuiteTaskOutcome> outcomes = {correct("a", 1.6)};
  nlohmann::json j = compute_suite_metrics(outcomes).to_json();
  ASSERT_EQ(j["fast_p"].size(), 4u);
  EXPECT_EQ(j["fast_p"][0]["name"], "fast_0");
  EXPECT_EQ(j["fast_p"][1]["name"], "fast_1");
  EXPECT_EQ(j["fast_p"][2]["name"], "fast_1.5");
  EXPECT_EQ(j["fast_p"][3]["name"], "fast_2");
  EXPECT_DOUBLE_EQ(j["fast_p"][2]["fraction"].get<double>(), 1.0);
  EXPECT_EQ(j["geomean_speedup"]["tasks"], 1);
}

}  // namespace
}  // namespace kforge::report

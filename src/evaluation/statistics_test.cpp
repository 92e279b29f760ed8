#include "evaluation/statistics.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

TEST(Statistics, SummarizesSamples) {
  std::vector<double> samples = {3.0, 1.0, 2.0, 10.0};
  SampleSummary s = summarize(samples);
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(s.max_ms, 10.0);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 4.0);
  EXPECT_NEAR(s.stddev_ms, 4.0825, 1e-3);
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(Statistics, SpeedupIntervalCoversTheTrueRatioAndIsDeterministic) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> base(10.0, 0.2), fast(5.0, 0.1);
  std::vector<double> a, b;
  for (int i = 0; i < 50; ++i) {
    a.push_back(base(rng));
    b.push_back(fast(rng));
  }
  SpeedupEstimate e = estimate_speedup(a, b);
  EXPECT_NEAR(e.speedup, 2.0, 0.05);
  EXPECT_LT(e.ci_low, e.speedup);
  EXPECT_GT(e.ci_high, e.speedup);
  EXPECT_LT(e.ci_low, 2.0 + 0.05);
  EXPECT_GT(e.ci_high, 2.0 - 0.05);
  SpeedupEstimate again = estimate_speedup(a, b);
  EXPECT_DOUBLE_EQ(again.ci_low, e.ci_low);
  EXPECT_DOUBLE_EQ(again.ci_high, e.ci_high);
}

TEST(Statistics, NoisierSamplesGiveAWiderInterval) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> tight(5.0, 0.05), loose(5.0, 1.0);
  std::vector<double> base, t, l;
  for (int i = 0; i < 40; ++i) {
    base.push_back(10.0);
    t.push_back(tight(rng));
    l.push_back(loose(rng));
  }
  SpeedupEstimate narrow = estimate_speedup(base, t), wide = estimate_speedup(base, l);
  EXPECT_LT(narrow.ci_high - narrow.ci_low, wide.ci_high - wide.ci_low);
}

TEST(Statistics, SpeedupThroughTheReferenceDividesAndWidensTheInterval) {
  // The best is 3x faster than eager [2.7, 3.3]; torch.compile 1.5x faster than eager
  // [1.4, 1.6]: the best is 2x faster than torch.compile.
  const SpeedupEstimate best{3.0, 2.7, 3.3, 0.95};
  const SpeedupEstimate compiled{1.5, 1.4, 1.6, 0.95};
  const SpeedupEstimate through = speedup_through(best, compiled);
  EXPECT_DOUBLE_EQ(through.speedup, 2.0);
  EXPECT_DOUBLE_EQ(through.level, 0.95);
  // Wider than either: log distances add in quadrature.
  const double below = std::hypot(std::log(3.0 / 2.7), std::log(1.6 / 1.5));
  const double above = std::hypot(std::log(3.3 / 3.0), std::log(1.5 / 1.4));
  EXPECT_NEAR(through.ci_low, 2.0 * std::exp(-below), 1e-12);
  EXPECT_NEAR(through.ci_high, 2.0 * std::exp(above), 1e-12);
  EXPECT_LT(through.ci_low, 2.0 * 2.7 / 3.0);
  EXPECT_GT(through.ci_high, 2.0 * 3.3 / 3.0);
  // An exact baseline ratio leaves the candidate's interval, scaled.
  const SpeedupEstimate exact = speedup_through(best, {1.5, 1.5, 1.5, 0.95});
  EXPECT_NEAR(exact.ci_low, 1.8, 1e-12);
  EXPECT_NEAR(exact.ci_high, 2.2, 1e-12);
  EXPECT_THROW(speedup_through(best, {0.0, 0.0, 0.0, 0.95}), Error);
}

TEST(Statistics, GeometricMeanOfEstimatesAddsTheirLogDistancesInQuadrature) {
  const SpeedupEstimate one{1.2, 1.1, 1.5, 0.95};
  const SpeedupEstimate alone = geometric_mean(std::vector<SpeedupEstimate>{one});
  EXPECT_DOUBLE_EQ(alone.speedup, 1.2);
  EXPECT_NEAR(alone.ci_low, 1.1, 1e-12);
  EXPECT_NEAR(alone.ci_high, 1.5, 1e-12);
  // Two workloads, 2x and 0.5x: the geomean is 1; each end n = 2 of its distances, in quadrature.
  const std::vector<SpeedupEstimate> two = {{2.0, 1.8, 2.4, 0.95}, {0.5, 0.4, 0.55, 0.95}};
  const SpeedupEstimate mean = geometric_mean(two);
  EXPECT_NEAR(mean.speedup, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(mean.level, 0.95);
  EXPECT_NEAR(mean.ci_low, std::exp(-std::hypot(std::log(2.0 / 1.8), std::log(0.5 / 0.4)) / 2),
              1e-12);
  EXPECT_NEAR(mean.ci_high, std::exp(std::hypot(std::log(2.4 / 2.0), std::log(0.55 / 0.5)) / 2),
              1e-12);
  // Narrower than either estimate's own interval: independent noise averages out.
  EXPECT_GT(mean.ci_low, 0.4 / 0.5);
  EXPECT_THROW(geometric_mean(std::vector<SpeedupEstimate>{}), Error);
  EXPECT_THROW(geometric_mean(std::vector<SpeedupEstimate>{{1.0, 0.0, 1.0, 0.95}}), Error);
}

TEST(Statistics, SpeedupEstimateReadsBackItsJson) {
  const SpeedupEstimate e{1.25, 1.1, 1.4, 0.9};
  const SpeedupEstimate back = nlohmann::json(e).get<SpeedupEstimate>();
  EXPECT_DOUBLE_EQ(back.speedup, 1.25);
  EXPECT_DOUBLE_EQ(back.ci_low, 1.1);
  EXPECT_DOUBLE_EQ(back.ci_high, 1.4);
  EXPECT_DOUBLE_EQ(back.level, 0.9);
}

TEST(Statistics, BootstrapIntervalBracketsTheStatisticWithinTheValuesRange) {
  std::vector<double> values = {1.0, 2.0, 3.0, 4.0, 10.0};
  auto mean = [](std::span<const double> v) {
    double sum = 0.0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  BootstrapInterval interval = bootstrap_interval(values, mean);
  EXPECT_GE(interval.low, 1.0);
  EXPECT_LE(interval.low, 4.0);
  EXPECT_GE(interval.high, 4.0);
  EXPECT_LE(interval.high, 10.0);
  BootstrapInterval again = bootstrap_interval(values, mean);
  EXPECT_DOUBLE_EQ(again.low, interval.low);
  EXPECT_DOUBLE_EQ(again.high, interval.high);
  std::vector<double> one = {7.0};
  BootstrapInterval single = bootstrap_interval(one, mean);
  EXPECT_DOUBLE_EQ(single.low, 7.0);
  EXPECT_DOUBLE_EQ(single.high, 7.0);
  EXPECT_THROW(bootstrap_interval({}, mean), Error);
}

}  // namespace
}  // namespace kforge::evaluation

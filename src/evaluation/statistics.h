// Summary statistics of timing samples and the speedup confidence interval.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace kforge::evaluation {

/// Summary of timing samples, in milliseconds.
struct SampleSummary {
  int count = 0;
  double min_ms = 0.0;
  double median_ms = 0.0;
  double max_ms = 0.0;
  double mean_ms = 0.0;
  double stddev_ms = 0.0;   // sample standard deviation (n - 1)
};

/// Summarizes `samples_ms`; an empty span gives count = 0 and zeros.
SampleSummary summarize(std::span<const double> samples_ms);

/// Median of `values` (mean of the two middle values for even counts); 0 for an empty span.
double median(std::span<const double> values);

/// Speedup of `candidate` over `baseline` = median(baseline) / median(candidate), with a
/// percentile-bootstrap confidence interval (Efron & Tibshirani, "An Introduction to the
/// Bootstrap", 1993, ch. 13): both sample sets are resampled independently `resamples` times
/// with a fixed seed, the ratio of medians is taken each time, and the (1-level)/2 and
/// (1+level)/2 quantiles bound the interval. Deterministic for a given seed.
struct SpeedupEstimate {
  double speedup = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
  double level = 0.95;
};
SpeedupEstimate estimate_speedup(std::span<const double> baseline_ms,
                                 std::span<const double> candidate_ms, double level = 0.95,
                                 int resamples = 2000, uint64_t seed = 1);

/// The speedup of a candidate over a baseline B that was not timed with it, through the reference
/// R that was: (R / candidate) / (R / B) = B / candidate, from `candidate_over_reference` (timed
/// now, e.g. rung 3's paired rounds) and `baseline_over_reference` (timed at another time, e.g.
/// torch.compile against eager in an earlier run, from the baseline cache). Each ratio comes from
/// its own interleaved measurement, so drift between the two times cancels within each. The
/// interval treats the two as independent estimates on the log scale (delta method: variances of
/// logs add): each end's distance from ln(speedup) is the root of the sum of the squares of the
/// matching distances of the two intervals (the candidate's lower with the baseline's upper, and
/// the reverse). `level` is `candidate_over_reference`'s. Throws Error when a speedup or interval
/// end is not finite and > 0.
SpeedupEstimate speedup_through(const SpeedupEstimate& candidate_over_reference,
                                const SpeedupEstimate& baseline_over_reference);

/// The geometric mean of independent speedup estimates (e.g. one per timed workload, as rung 2's
/// geomean weighs them): exp of the mean of their logs. Its interval by the delta method on the
/// log scale, as speedup_through: the variance of a mean of n independent terms is the sum of
/// their variances over n^2, so each end's distance from the mean's log is the root of the sum
/// of the squares of the estimates' distances on that side, over n. One estimate gives itself.
/// `level` is the first's. Throws Error for an empty span or a speedup or interval end that is
/// not finite and > 0.
SpeedupEstimate geometric_mean(std::span<const SpeedupEstimate> estimates);

/// A percentile-bootstrap confidence interval of `statistic` over `values` (Efron & Tibshirani,
/// 1993, ch. 13, as estimate_speedup): `values` is resampled with replacement `resamples` times
/// with a fixed seed, `statistic` is taken of each resample, and the (1-level)/2 and
/// (1+level)/2 quantiles of those bound the interval. One value gives the degenerate interval
/// [statistic, statistic]. Throws Error for an empty span or resamples < 1.
struct BootstrapInterval {
  double low = 0.0;
  double high = 0.0;
  double level = 0.95;
};
BootstrapInterval bootstrap_interval(
    std::span<const double> values,
    const std::function<double(std::span<const double>)>& statistic, double level = 0.95,
    int resamples = 2000, uint64_t seed = 1);

void to_json(nlohmann::json& j, const SampleSummary& s);
void to_json(nlohmann::json& j, const SpeedupEstimate& s);
/// Reads what to_json wrote; throws nlohmann's exception for a missing or mistyped field.
void from_json(const nlohmann::json& j, SpeedupEstimate& s);

}  // namespace kforge::evaluation

#include "evaluation/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

// The q-quantile of an ascending `sorted` (non-empty): the element at floor(q * (n - 1)).
double sorted_quantile(const std::vector<double>& sorted, double q) {
  double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  return sorted[static_cast<size_t>(position)];
}

}  // namespace

double median(std::span<const double> values) {
  if (values.empty()) return 0.0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

SampleSummary summarize(std::span<const double> samples_ms) {
  SampleSummary summary;
  summary.count = static_cast<int>(samples_ms.size());
  if (samples_ms.empty()) return summary;
  auto [low, high] = std::minmax_element(samples_ms.begin(), samples_ms.end());
  summary.min_ms = *low;
  summary.max_ms = *high;
  summary.median_ms = median(samples_ms);
  summary.mean_ms =
      std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(summary.count);
  if (summary.count > 1) {
    double squares = 0.0;
    for (double x : samples_ms) squares += (x - summary.mean_ms) * (x - summary.mean_ms);
    summary.stddev_ms = std::sqrt(squares / (summary.count - 1));
  }
  return summary;
}

SpeedupEstimate estimate_speedup(std::span<const double> baseline_ms,
                                 std::span<const double> candidate_ms, double level,
                                 int resamples, uint64_t seed) {
  SpeedupEstimate estimate;
  estimate.level = level;
  if (baseline_ms.empty() || candidate_ms.empty()) return estimate;
  estimate.speedup = median(baseline_ms) / median(candidate_ms);
  std::mt19937_64 rng(seed);
  auto resample_median = [&rng](std::span<const double> samples, std::vector<double>& scratch) {
    std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
    scratch.resize(samples.size());
    for (double& x : scratch) x = samples[pick(rng)];
    return median(scratch);
  };
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  std::vector<double> scratch;
  for (int i = 0; i < resamples; ++i) {
    double base = resample_median(baseline_ms, scratch);
    double cand = resample_median(candidate_ms, scratch);
    ratios.push_back(base / cand);
  }
  std::sort(ratios.begin(), ratios.end());
  estimate.ci_low = sorted_quantile(ratios, (1.0 - level) / 2.0);
  estimate.ci_high = sorted_quantile(ratios, (1.0 + level) / 2.0);
  return estimate;
}

SpeedupEstimate speedup_through(const SpeedupEstimate& candidate_over_reference,
                                const SpeedupEstimate& baseline_over_reference) {
  for (const SpeedupEstimate* e : {&candidate_over_reference, &baseline_over_reference}) {
    for (const double value : {e->speedup, e->ci_low, e->ci_high}) {
      if (!std::isfinite(value) || value <= 0.0) {
        throw Error("speedup_through: expected speedups and interval ends > 0, got " +
                    std::to_string(value));
      }
    }
  }
  const SpeedupEstimate& a = candidate_over_reference;
  const SpeedupEstimate& b = baseline_over_reference;
  const double log_speedup = std::log(a.speedup) - std::log(b.speedup);
  // Lower end: the candidate's low side with the baseline's high side (a larger B/R ratio
  // lowers B / candidate), and the reverse for the upper end.
  const double below = std::hypot(std::log(a.speedup / a.ci_low), std::log(b.ci_high / b.speedup));
  const double above = std::hypot(std::log(a.ci_high / a.speedup), std::log(b.speedup / b.ci_low));
  SpeedupEstimate through;
  through.speedup = std::exp(log_speedup);
  through.ci_low = std::exp(log_speedup - below);
  through.ci_high = std::exp(log_speedup + above);
  through.level = a.level;
  return through;
}

SpeedupEstimate geometric_mean(std::span<const SpeedupEstimate> estimates) {
  if (estimates.empty()) throw Error("geometric_mean: no speedup estimates");
  double log_sum = 0.0, below = 0.0, above = 0.0;
  for (const SpeedupEstimate& e : estimates) {
    for (const double value : {e.speedup, e.ci_low, e.ci_high}) {
      if (!std::isfinite(value) || value <= 0.0) {
        throw Error("geometric_mean: expected speedups and interval ends > 0, got " +
                    std::to_string(value));
      }
    }
    log_sum += std::log(e.speedup);
    below += std::pow(std::log(e.speedup / e.ci_low), 2);
    above += std::pow(std::log(e.ci_high / e.speedup), 2);
  }
  const auto n = static_cast<double>(estimates.size());
  SpeedupEstimate mean;
  mean.speedup = std::exp(log_sum / n);
  mean.ci_low = std::exp(std::log(mean.speedup) - std::sqrt(below) / n);
  mean.ci_high = std::exp(std::log(mean.speedup) + std::sqrt(above) / n);
  mean.level = estimates.front().level;
  return mean;
}

BootstrapInterval bootstrap_interval(
    std::span<const double> values,
    const std::function<double(std::span<const double>)>& statistic, double level,
    int resamples, uint64_t seed) {
  if (values.empty()) throw Error("bootstrap_interval: no values to resample");
  if (resamples < 1) throw Error("bootstrap_interval: resamples must be at least 1");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> statistics;
  statistics.reserve(static_cast<size_t>(resamples));
  std::vector<double> resample(values.size());
  for (int i = 0; i < resamples; ++i) {
    for (double& x : resample) x = values[pick(rng)];
    statistics.push_back(statistic(resample));
  }
  std::sort(statistics.begin(), statistics.end());
  return {sorted_quantile(statistics, (1.0 - level) / 2.0),
          sorted_quantile(statistics, (1.0 + level) / 2.0), level};
}

void to_json(nlohmann::json& j, const SampleSummary& s) {
  j = {{"count", s.count},         {"min_ms", s.min_ms},   {"median_ms", s.median_ms},
       {"max_ms", s.max_ms},       {"mean_ms", s.mean_ms}, {"stddev_ms", s.stddev_ms}};
}

void to_json(nlohmann::json& j, const SpeedupEstimate& s) {
  j = {{"speedup", s.speedup}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high}, {"level", s.level}};
}

void from_json(const nlohmann::json& j, SpeedupEstimate& s) {
  s.speedup = j.at("speedup").get<double>();
  s.ci_low = j.at("ci_low").get<double>();
  s.ci_high = j.at("ci_high").get<double>();
  s.level = j.value("level", 0.95);
}

}  // namespace kforge::evaluation

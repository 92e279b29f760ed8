#include "report/suite_metrics.h"

#include <fmt/format.h>

#include <cmath>

#include "common/error.h"
#include "evaluation/statistics.h"

namespace kforge::report {
namespace {

double mean_log(std::span<const double> logs) {
  double sum = 0.0;
  for (double x : logs) sum += x;
  return sum / static_cast<double>(logs.size());
}

CostSummary summarize_cost(std::span<const SuiteTaskOutcome> outcomes,
                           std::optional<double> (*cost)(const SuiteTaskOutcome&)) {
  CostSummary summary;
  for (const SuiteTaskOutcome& outcome : outcomes) {
    if (std::optional<double> value = cost(outcome)) {
      ++summary.reported;
      summary.total += *value;
    }
  }
  if (summary.reported > 0) summary.mean = summary.total / summary.reported;
  return summary;
}

nlohmann::json cost_json(const CostSummary& cost) {
  return {{"reported", cost.reported}, {"total", cost.total}, {"mean", cost.mean}};
}

}  // namespace

FastP fast_p(std::span<const SuiteTaskOutcome> outcomes, double p) {
  FastP result;
  result.p = p;
  for (const SuiteTaskOutcome& outcome : outcomes) {
    if (outcome.correct && outcome.speedup > p) ++result.count;
  }
  if (!outcomes.empty()) result.fraction = static_cast<double>(result.count) / outcomes.size();
  return result;
}

std::optional<GeomeanSpeedup> geomean_speedup(std::span<const SuiteTaskOutcome> outcomes,
                                              double level, int resamples, uint64_t seed) {
  std::vector<double> logs;
  for (const SuiteTaskOutcome& outcome : outcomes) {
    if (!outcome.correct) continue;
    if (!std::isfinite(outcome.speedup) || outcome.speedup <= 0.0) {
      throw Error(
          fmt::format("suite metrics: task '{}' is correct but its speedup is {} "
                      "(expected a finite number > 0)",
                      outcome.name, outcome.speedup));
    }
    logs.push_back(std::log(outcome.speedup));
  }
  if (logs.empty()) return std::nullopt;
  // The mean of logs is resampled rather than the product of speedups: the same geomean, and
  // no overflow however many tasks there are.
  evaluation::BootstrapInterval interval =
      evaluation::bootstrap_interval(logs, mean_log, level, resamples, seed);
  GeomeanSpeedup result;
  result.geomean = std::exp(mean_log(logs));
  result.ci_low = std::exp(interval.low);
  result.ci_high = std::exp(interval.high);
  result.level = level;
  result.count = static_cast<int>(logs.size());
  return result;
}

SuiteMetrics compute_suite_metrics(std::span<const SuiteTaskOutcome> outcomes,
                                   std::span<const double> thresholds, double level, int resamples,
                                   uint64_t seed) {
  SuiteMetrics metrics;
  metrics.task_count = static_cast<int>(outcomes.size());
  for (const SuiteTaskOutcome& outcome : outcomes) metrics.correct_count += outcome.correct;
  if (metrics.task_count > 0) {
    metrics.correct_fraction = static_cast<double>(metrics.correct_count) / metrics.task_count;
  }
  for (double p : thresholds) metrics.fast_p.push_back(fast_p(outcomes, p));
  metrics.geomean_speedup = geomean_speedup(outcomes, level, resamples, seed);
  metrics.wall_s = summarize_cost(
      outcomes, [](const SuiteTaskOutcome& o) -> std::optional<double> { return o.wall_s; });
  metrics.device_s = summarize_cost(outcomes, [](const SuiteTaskOutcome& o) { return o.device_s; });
  metrics.llm_cost_usd =
      summarize_cost(outcomes, [](const SuiteTaskOutcome& o) { return o.llm_cost_usd; });
  return metrics;
}

std::string fast_p_name(double p) { return fmt::format("fast_{}", p); }

nlohmann::json SuiteMetrics::to_json() const {
  nlohmann::json j = {
      {"tasks", task_count}, {"correct", correct_count}, {"correct_fraction", correct_fraction}};
  j["fast_p"] = nlohmann::json::array();
  for (const FastP& f : fast_p) {
    j["fast_p"].push_back(
        {{"name", fast_p_name(f.p)}, {"p", f.p}, {"count", f.count}, {"fraction", f.fraction}});
  }
  if (geomean_speedup) {
    j["geomean_speedup"] = {{"geomean", geomean_speedup->geomean},
                            {"ci_low", geomean_speedup->ci_low},
                            {"ci_high", geomean_speedup->ci_high},
                            {"level", geomean_speedup->level},
                            {"tasks", geomean_speedup->count}};
  } else {
    j["geomean_speedup"] = nullptr;
  }
  j["wall_s"] = cost_json(wall_s);
  j["device_s"] = cost_json(device_s);
  j["llm_cost_usd"] = cost_json(llm_cost_usd);
  return j;
}

}  // namespace kforge::report

// The aggregate metrics of a suite (many tasks), as the field reports them (KernelBench):
// correctness rate, fast_p at several thresholds, and the geometric-mean speedup over the correct
// tasks with a bootstrap confidence interval, plus the time and money each task cost.
//
// Pure functions over per-task outcomes: no files, no processes (`kforge suite` gathers the
// outcomes from each task's result.json; see report/suite_report.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kforge::report {

/// What the aggregation needs from one task of a suite.
struct SuiteTaskOutcome {
  std::string name;
  /// True when the run found a candidate that passed the correctness gate and was timed against
  /// the baseline at the final rung. A task whose run failed (crash, timeout, bad task file)
  /// is not correct.
  bool correct = false;
  /// Baseline median time / best candidate's median time at the final rung (> 1: faster).
  /// Read only when `correct`; a correct task must carry a finite speedup > 0.
  double speedup = 0.0;
  double wall_s = 0.0;                 // wall-clock seconds the task's run took
  std::optional<double> device_s;      // device-seconds, when the run reported them
  std::optional<double> llm_cost_usd;  // US dollars spent on the LLM, when it used one
};

/// fast_p at one threshold.
struct FastP {
  double p = 0.0;
  int count = 0;          // tasks correct with speedup > p
  double fraction = 0.0;  // count / number of tasks (0 when there are none)
};

/// Geometric mean of the correct tasks' speedups with a percentile-bootstrap interval.
struct GeomeanSpeedup {
  double geomean = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
  double level = 0.95;
  int count = 0;  // correct tasks it is taken over
};

/// Sum and mean of a per-task cost over the tasks that reported it.
struct CostSummary {
  int reported = 0;  // tasks that reported this cost
  double total = 0.0;
  double mean = 0.0;  // total / reported (0 when none reported)
};

struct SuiteMetrics {
  int task_count = 0;
  int correct_count = 0;
  double correct_fraction = 0.0;  // correct_count / task_count (0 for an empty suite)
  std::vector<FastP> fast_p;      // one per threshold, in the order given
  std::optional<GeomeanSpeedup> geomean_speedup;  // absent when no task is correct
  CostSummary wall_s;
  CostSummary device_s;
  CostSummary llm_cost_usd;
  nlohmann::json to_json() const;
};

/// The thresholds the field reports: fast_0 (= correctness rate), fast_1 (faster than the
/// baseline), fast_1.5 and fast_2.
inline constexpr double kFastPThresholds[] = {0.0, 1.0, 1.5, 2.0};

/// fast_p = |{ i : correct_i and speedup_i > p }| / n over all n tasks, failed ones included
/// (KernelBench, Ouyang et al. 2025, arXiv:2502.10517; ScalingIntelligence/KernelBench
/// src/score.py `fastp`: a strict ">" and the denominator is every task). Since a correct task's
/// speedup is > 0, fast_0 is the correctness rate; a speedup of exactly p does not count.
FastP fast_p(std::span<const SuiteTaskOutcome> outcomes, double p);

/// The geometric mean of the correct tasks' speedups, exp(mean(ln speedup_i)), as KernelBench's
/// `geometric_mean_speed_ratio_correct_only` (src/score.py), with a percentile-bootstrap
/// interval over tasks (evaluation::bootstrap_interval: tasks resampled with replacement,
/// `resamples` times, fixed `seed`). Absent when no task is correct; one correct task gives the
/// degenerate interval [s, s]. Throws Error when a correct task's speedup is not finite and > 0.
std::optional<GeomeanSpeedup> geomean_speedup(std::span<const SuiteTaskOutcome> outcomes,
                                              double level = 0.95, int resamples = 2000,
                                              uint64_t seed = 1);

/// Every metric above, with fast_p at `thresholds`, and the sums and means of the costs.
SuiteMetrics compute_suite_metrics(std::span<const SuiteTaskOutcome> outcomes,
                                   std::span<const double> thresholds = kFastPThresholds,
                                   double level = 0.95, int resamples = 2000, uint64_t seed = 1);

/// "fast_1.5" for p = 1.5, "fast_0" for p = 0: the metric's name as the field writes it.
std::string fast_p_name(double p);

}  // namespace kforge::report

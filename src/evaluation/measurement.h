// Judging timings: the physical floor a time cannot beat, the host-clock cross-check, throttled
// samples, and the paired interleaved comparison that decides whether one kernel is faster than
// another beyond noise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ladder.h"
#include "evaluation/statistics.h"
#include "core/verdict.h"
#include "core/task.h"
#include "worker/protocol.h"

namespace kforge::evaluation {

/// The least time one call can take on a device: max(bytes / bandwidth, FLOPs / peak), where
/// bandwidth is the worker's measured copy bandwidth and peak its dtype's peak FLOP rate, each
/// multiplied by `slack` (> 1) so that an honest kernel beating the copy (a read-heavy kernel
/// moves bytes somewhat faster than a copy) is never rejected. A roofline bound (Williams,
/// Waterman & Patterson, "Roofline", CACM 2009) with the measured copy as the memory roof.
struct PhysicalFloor {
  double bytes = 0.0;      // task's bytes per call (bytes_per_call)
  double flops = 0.0;      // task's FLOPs per call, 0 if it gives no formula
  double bytes_ms = 0.0;   // bytes / (copy_bytes_per_s * slack), ms; 0 when unmeasured
  double flops_ms = 0.0;   // flops / (peak * slack), ms; 0 when unknown
  double floor_ms = 0.0;   // the larger of the two
};
PhysicalFloor physical_floor(const Task& task, const Workload& workload,
                             const worker::DeviceInfo& device, double slack);

/// Thresholds of the timing checks.
struct TimingChecks {
  double floor_slack = 1.5;
  /// A time below the floor rejects the candidate (implausible_timing) when true; else it is a
  /// warning. The evaluator rejects only on cuda: there the L2 is flushed to a known size and
  /// the copy is a device copy. On cpu, caches the flush cannot reach (virtual machines hide
  /// their size) and write-allocate traffic in memcpy let honest kernels beat the copy.
  bool floor_rejects = true;
  /// Work hidden from the device events: flagged when median(host - device) - overhead exceeds
  /// hidden_ms + hidden_fraction x median(device).
  double hidden_ms = 0.05;
  double hidden_fraction = 0.5;
  /// A candidate is flagged (TimingVerdict::slow_warmup, a warning) when its fastest warm-up
  /// call takes longer than slow_warmup_factor x the median timed call + slow_warmup_ms: a kernel
  /// that stalls while it is warmed up cuts the samples the time limit leaves (issue 25 part 6).
  double slow_warmup_factor = 5.0;
  double slow_warmup_ms = 1.0;
};

/// One timing request judged.
struct TimingVerdict {
  Verdict verdict = Verdict::ok;   // ok, runtime_error (passed through) or implausible_timing
  std::string message;
  std::vector<double> samples_ms;  // samples kept: throttled ones dropped (unless too few left)
  SampleSummary summary;
  int throttled_dropped = 0;
  double host_gap_ms = 0.0;        // median(host - device) - overhead, ms
  PhysicalFloor floor;
  std::string stop_reason;
  double setup_ms = 0.0;           // making and uploading the input sets (0 when reused)
  std::string warning;             // e.g. throttling seen, samples cut by the time limit
  bool slow_warmup = false;        // warm-up calls much slower than timed ones (a warning)
};

/// Judges `result` against `floor` and `checks`. A median below floor.floor_ms, or hidden work
/// above the threshold, gives implausible_timing with the numbers in the message.
TimingVerdict judge_timing(const worker::TimeResult& result, const PhysicalFloor& floor,
                           const TimingChecks& checks);

/// Outcome of timing kernel `a` and kernel `b` interleaved in rounds on the same inputs.
struct PairedComparison {
  /// faster, slower or tie (never failed: a failed timing gives no comparison at all).
  using Outcome = ComparisonOutcome;
  Outcome outcome = Outcome::tie;    // of b relative to a
  SpeedupEstimate speedup;           // of b over a: time(a) / time(b)
  std::vector<double> round_ratios;  // median(a_r) / median(b_r) per round
};

/// The outcome of a speedup of `b` over `a` (time(a) / time(b)) with its confidence interval:
/// faster when the interval's lower end is above 1 + min_gain, slower when its upper end is below
/// 1 / (1 + min_gain), else a tie. One rule for every rung that judges two timings (acceptance,
/// rung 1's window, rung 2's challenge, rung 3), so "tie" means the same thing in each.
ComparisonOutcome judge_speedup(const SpeedupEstimate& speedup, double min_gain);

/// Paired comparison over rounds (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time",
/// ISMM 2013: resample at both levels, rounds and repetitions). The estimate is the geometric
/// mean over rounds of median(a_r) / median(b_r); its `level` confidence interval is a
/// percentile bootstrap that resamples rounds, then samples within each round; the outcome is
/// judge_speedup's. Deterministic for a seed. Throws Error when the rounds are
/// empty or of different counts.
PairedComparison judge_paired(const std::vector<std::vector<double>>& a_rounds,
                              const std::vector<std::vector<double>>& b_rounds, double level,
                              double min_gain, uint64_t seed = 1, int resamples = 2000);

}  // namespace kforge::evaluation

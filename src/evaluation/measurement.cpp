#include "evaluation/measurement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

std::string format_ms(double ms) {
  char text[48];
  if (ms < 0.01) {
    std::snprintf(text, sizeof text, "%.2f us", ms * 1000.0);
  } else {
    std::snprintf(text, sizeof text, "%.4g ms", ms);
  }
  return text;
}

/// The dtype whose peak bounds the arithmetic: the first floating-point output's.
std::string arithmetic_dtype(const Signature& signature) {
  for (const TensorSpec& tensor : signature.tensors) {
    if (tensor.role == TensorRole::output) return to_string(tensor.dtype);
  }
  return "f32";
}

}  // namespace

PhysicalFloor physical_floor(const Task& task, const Workload& workload,
                             const worker::DeviceInfo& device, double slack) {
  if (!(slack >= 1.0)) throw Error("physical floor: slack must be >= 1");
  PhysicalFloor floor;
  floor.bytes = static_cast<double>(bytes_per_call(task, workload));
  floor.flops = flops_per_call(task, workload).value_or(0.0);
  if (device.copy_bytes_per_s > 0) {
    floor.bytes_ms = floor.bytes / (device.copy_bytes_per_s * slack) * 1e3;
  }
  // The larger of the attribute-derived bound (tensor cores included) and the measured rate:
  // the floor must stay below what any honest kernel can reach.
  const std::string dtype = arithmetic_dtype(task.signature);
  double peak = 0.0;
  if (const auto bound = device.peak_flops_per_s.find(dtype); bound != device.peak_flops_per_s.end()) {
    peak = bound->second;
  }
  if (const auto measured = device.measured_flops_per_s.find(dtype);
      measured != device.measured_flops_per_s.end()) {
    peak = std::max(peak, measured->second);
  }
  if (floor.flops > 0 && peak > 0) floor.flops_ms = floor.flops / (peak * slack) * 1e3;
  floor.floor_ms = std::max(floor.bytes_ms, floor.flops_ms);
  return floor;
}

TimingVerdict judge_timing(const worker::TimeResult& result, const PhysicalFloor& floor,
                           const TimingChecks& checks) {
  TimingVerdict verdict;
  verdict.floor = floor;
  verdict.stop_reason = result.stop_reason;
  verdict.setup_ms = result.inputs_reused ? 0.0 : result.setup_ms;
  if (result.verdict != Verdict::ok) {
    verdict.verdict = result.verdict;
    verdict.message = result.message;
    return verdict;
  }
  // Samples taken while the device reported a slowdown do not represent the kernel.
  for (size_t i = 0; i < result.samples_ms.size(); ++i) {
    const bool throttled = i < result.throttled.size() && result.throttled[i];
    if (throttled) {
      ++verdict.throttled_dropped;
    } else {
      verdict.samples_ms.push_back(result.samples_ms[i]);
    }
  }
  if (verdict.throttled_dropped > 0) {
    verdict.warning = std::to_string(verdict.throttled_dropped) + " of " +
                      std::to_string(result.samples_ms.size()) +
                      " samples taken while the device was throttled were dropped";
    if (verdict.samples_ms.size() * 2 < result.samples_ms.size()) {
      verdict.samples_ms = result.samples_ms;  // too few left: keep all, and say so
      verdict.warning += " (too few left: all kept; the times may be pessimistic)";
      verdict.throttled_dropped = 0;
    }
  }
  verdict.summary = summarize(verdict.samples_ms);
  const double device_median = verdict.summary.median_ms;
  const auto add_warning = [&verdict](const std::string& text) {
    verdict.warning += (verdict.warning.empty() ? "" : "; ") + text;
  };
  if (result.stop_reason == "max_seconds") {
    add_warning("the measurement stopped at its time limit after " +
                std::to_string(result.samples_ms.size()) + " timed calls" +
                (result.warmup_ms.empty() ? "" : " (warm-up included in the limit)") +
                ": fewer samples than the noise target needed");
  }
  if (!result.warmup_ms.empty() && !result.host_ms.empty()) {
    // The fastest warm-up call against the median timed call (both host clocks with a
    // device-wide synchronize): one slow first call (module loading) does not count.
    const double fastest_warmup = *std::min_element(result.warmup_ms.begin(),
                                                    result.warmup_ms.end());
    const double timed = median(result.host_ms);
    if (fastest_warmup > checks.slow_warmup_factor * timed + checks.slow_warmup_ms) {
      verdict.slow_warmup = true;
      add_warning("every warm-up call was much slower than the timed calls (fastest warm-up " +
                  format_ms(fastest_warmup) + " vs timed median " + format_ms(timed) +
                  "): the kernel may recognise repeated calls");
    }
  }

  if (!result.host_ms.empty() && result.host_ms.size() == result.samples_ms.size()) {
    std::vector<double> gaps;
    for (size_t i = 0; i < result.host_ms.size(); ++i) {
      gaps.push_back(result.host_ms[i] - result.samples_ms[i]);
    }
    verdict.host_gap_ms = median(gaps) - result.overhead_ms;
    const double allowed = checks.hidden_ms + checks.hidden_fraction * device_median;
    if (verdict.host_gap_ms > allowed) {
      verdict.verdict = Verdict::implausible_timing;
      verdict.message =
          "work hidden from the timing events: the host clock around each call (with a "
          "device-wide synchronize) reads " + format_ms(verdict.host_gap_ms) +
          " more than the device events on the worker's stream (median " +
          format_ms(device_median) + ", allowed gap " + format_ms(allowed) +
          "); launch on args->stream and do not leave work in other streams or threads";
      return verdict;
    }
  }
  if (floor.floor_ms > 0 && device_median < floor.floor_ms) {
    const std::string finding =
        "median " + format_ms(device_median) + " is below the physical floor of " +
        format_ms(floor.floor_ms) + " (" + std::to_string(static_cast<int64_t>(floor.bytes)) +
        " bytes at the measured copy bandwidth" +
        (floor.flops_ms > 0 ? ", or the FLOPs at the device's peak" : "") + ", with slack)";
    if (checks.floor_rejects) {
      verdict.verdict = Verdict::implausible_timing;
      verdict.message = "impossible result: " + finding;
    } else {
      add_warning(finding);
    }
  }
  return verdict;
}

ComparisonOutcome judge_speedup(const SpeedupEstimate& speedup, double min_gain) {
  if (speedup.ci_low > 1.0 + min_gain) return ComparisonOutcome::faster;
  if (speedup.ci_high < 1.0 / (1.0 + min_gain)) return ComparisonOutcome::slower;
  return ComparisonOutcome::tie;
}

PairedComparison judge_paired(const std::vector<std::vector<double>>& a_rounds,
                              const std::vector<std::vector<double>>& b_rounds, double level,
                              double min_gain, uint64_t seed, int resamples) {
  if (a_rounds.empty() || a_rounds.size() != b_rounds.size()) {
    throw Error("paired comparison needs the same non-zero number of rounds for both kernels");
  }
  for (size_t r = 0; r < a_rounds.size(); ++r) {
    if (a_rounds[r].empty() || b_rounds[r].empty()) {
      throw Error("paired comparison: round " + std::to_string(r) + " has no samples");
    }
  }
  PairedComparison comparison;
  comparison.speedup.level = level;
  double log_sum = 0.0;
  for (size_t r = 0; r < a_rounds.size(); ++r) {
    const double ratio = median(a_rounds[r]) / median(b_rounds[r]);
    comparison.round_ratios.push_back(ratio);
    log_sum += std::log(ratio);
  }
  const auto rounds = static_cast<double>(a_rounds.size());
  comparison.speedup.speedup = std::exp(log_sum / rounds);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick_round(0, a_rounds.size() - 1);
  std::vector<double> estimates;
  estimates.reserve(static_cast<size_t>(resamples));
  std::vector<double> scratch;
  const auto resampled_median = [&](const std::vector<double>& samples) {
    std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
    scratch.resize(samples.size());
    for (double& value : scratch) value = samples[pick(rng)];
    return median(scratch);
  };
  for (int i = 0; i < resamples; ++i) {
    double sum = 0.0;
    for (size_t k = 0; k < a_rounds.size(); ++k) {
      const size_t r = pick_round(rng);
      sum += std::log(resampled_median(a_rounds[r]) / resampled_median(b_rounds[r]));
    }
    estimates.push_back(std::exp(sum / rounds));
  }
  std::sort(estimates.begin(), estimates.end());
  const auto quantile = [&](double q) {
    const auto index = static_cast<size_t>(std::clamp(q * (estimates.size() - 1), 0.0,
                                                      static_cast<double>(estimates.size() - 1)));
    return estimates[index];
  };
  comparison.speedup.ci_low = quantile((1.0 - level) / 2.0);
  comparison.speedup.ci_high = quantile((1.0 + level) / 2.0);
  comparison.outcome = judge_speedup(comparison.speedup, min_gain);
  return comparison;
}

}  // namespace kforge::evaluation

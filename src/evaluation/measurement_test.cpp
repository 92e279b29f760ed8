// The timing judgments: physical floor, host cross-check, throttling, paired acceptance.
#include "evaluation/measurement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

Task copy_task() {
  Task task;
  task.signature.tensors = {{"x", TensorRole::input, DType::f32, {"n"}},
                            {"y", TensorRole::output, DType::f32, {"n"}}};
  task.flops_formula = "n";
  return task;
}

Workload n_elements(int64_t n) {
  Workload workload;
  workload.name = "w";
  workload.dims = {{"n", n}};
  return workload;
}

worker::DeviceInfo h200_like() {
  worker::DeviceInfo device;
  device.copy_bytes_per_s = 4e12;
  device.peak_flops_per_s = {{"f32", 1e15}};
  return device;
}

worker::TimeResult samples(std::vector<double> device_ms, std::vector<double> host_ms = {}) {
  worker::TimeResult result;
  result.samples_ms = std::move(device_ms);
  result.host_ms = std::move(host_ms);
  return result;
}

TEST(JudgeTiming, SaysWhenTheTimeLimitCutTheSamples) {
  worker::TimeResult result = samples({1.0, 1.0, 1.0}, {1.1, 1.1, 1.1});
  result.stop_reason = "max_seconds";
  result.warmup_ms = {1.2, 1.1};
  const TimingVerdict verdict = judge_timing(result, PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(verdict.verdict, Verdict::ok);
  EXPECT_EQ(verdict.stop_reason, "max_seconds");
  EXPECT_NE(verdict.warning.find("time limit after 3 timed calls"), std::string::npos)
      << verdict.warning;
  EXPECT_FALSE(verdict.slow_warmup);
  result.stop_reason = "noise";
  EXPECT_TRUE(judge_timing(result, PhysicalFloor{}, TimingChecks{}).warning.empty());
}

TEST(JudgeTiming, FlagsWarmUpCallsMuchSlowerThanTimedOnes) {
  worker::TimeResult result = samples({1.0, 1.0, 1.0}, {1.1, 1.1, 1.1});
  result.stop_reason = "noise";
  result.warmup_ms = {40.0, 25.0};  // a kernel that stalls while it is warmed up
  const TimingVerdict verdict = judge_timing(result, PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(verdict.verdict, Verdict::ok);  // the time is honest; the user is told
  EXPECT_TRUE(verdict.slow_warmup);
  EXPECT_NE(verdict.warning.find("warm-up"), std::string::npos) << verdict.warning;
  result.warmup_ms = {40.0, 1.2};  // one slow first call (module loading) is not a finding
  EXPECT_FALSE(judge_timing(result, PhysicalFloor{}, TimingChecks{}).slow_warmup);
}

TEST(PhysicalFloor, BytesOverBandwidthWithSlack) {
  // 2^28 floats in and out: 2 GiB at 4 TB/s x 1.5 slack.
  const PhysicalFloor floor = physical_floor(copy_task(), n_elements(1 << 28), h200_like(), 1.5);
  EXPECT_EQ(floor.bytes, 2.0 * (1 << 28) * 4);
  EXPECT_NEAR(floor.bytes_ms, floor.bytes / 6e12 * 1e3, 1e-9);
  EXPECT_NEAR(floor.flops_ms, (1 << 28) / 1.5e15 * 1e3, 1e-12);
  EXPECT_EQ(floor.floor_ms, floor.bytes_ms);
  Task custom = copy_task();
  custom.bytes_formula = "4*n";  // the task says only the input must be read
  EXPECT_EQ(physical_floor(custom, n_elements(1 << 28), h200_like(), 1.5).bytes, 4.0 * (1 << 28));
  EXPECT_THROW(physical_floor(copy_task(), n_elements(8), h200_like(), 0.5), Error);
  EXPECT_EQ(physical_floor(copy_task(), n_elements(8), worker::DeviceInfo{}, 1.5).floor_ms, 0.0);
}

TEST(PhysicalFloor, PeakIsTheLargerOfBoundAndMeasuredRate) {
  worker::DeviceInfo device = h200_like();
  device.measured_flops_per_s = {{"f32", 6e13}};  // CUDA cores only: below the 1e15 bound
  EXPECT_NEAR(physical_floor(copy_task(), n_elements(1 << 28), device, 1.5).flops_ms,
              (1 << 28) / 1.5e15 * 1e3, 1e-12);
  device.measured_flops_per_s = {{"f32", 2e15}};  // a device faster than its table entry
  EXPECT_NEAR(physical_floor(copy_task(), n_elements(1 << 28), device, 1.5).flops_ms,
              (1 << 28) / 3e15 * 1e3, 1e-12);
  device.peak_flops_per_s.clear();  // measured only
  EXPECT_NEAR(physical_floor(copy_task(), n_elements(1 << 28), device, 1.5).flops_ms,
              (1 << 28) / 3e15 * 1e3, 1e-12);
}

TEST(JudgeTiming, FasterThanTheFloorIsImpossible) {
  const PhysicalFloor floor = physical_floor(copy_task(), n_elements(1 << 28), h200_like(), 1.5);
  TimingVerdict honest = judge_timing(samples({0.6, 0.61, 0.62}), floor, TimingChecks{});
  EXPECT_EQ(honest.verdict, Verdict::ok) << honest.message;
  TimingVerdict cheat = judge_timing(samples({0.01, 0.01, 0.01}), floor, TimingChecks{});
  EXPECT_EQ(cheat.verdict, Verdict::implausible_timing);
  EXPECT_NE(cheat.message.find("below the physical floor"), std::string::npos) << cheat.message;
  TimingChecks advisory;
  advisory.floor_rejects = false;  // cpu: caches make the copy a soft ceiling
  TimingVerdict warned = judge_timing(samples({0.01, 0.01, 0.01}), floor, advisory);
  EXPECT_EQ(warned.verdict, Verdict::ok);
  EXPECT_NE(warned.warning.find("below the physical floor"), std::string::npos) << warned.warning;
}

TEST(JudgeTiming, WorkHiddenFromTheEventsIsFlagged) {
  // Device events see 5 us; the host clock with a device-wide sync sees 2 ms: work ran on
  // another stream or thread.
  TimingVerdict hidden =
      judge_timing(samples({0.005, 0.005, 0.005}, {2.0, 2.1, 2.0}), PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(hidden.verdict, Verdict::implausible_timing);
  EXPECT_NE(hidden.message.find("hidden"), std::string::npos) << hidden.message;
  // Ordinary launch and synchronize overhead (tens of us) is not.
  TimingVerdict honest = judge_timing(samples({1.0, 1.0, 1.0}, {1.03, 1.02, 1.04}),
                                      PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(honest.verdict, Verdict::ok) << honest.message;
  EXPECT_NEAR(honest.host_gap_ms, 0.03, 1e-9);
}

TEST(JudgeTiming, ThrottledSamplesAreDroppedWithAWarning) {
  worker::TimeResult result = samples({1.0, 1.5, 1.0, 1.0});
  result.throttled = {false, true, false, false};
  TimingVerdict verdict = judge_timing(result, PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(verdict.samples_ms, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(verdict.throttled_dropped, 1);
  EXPECT_NE(verdict.warning.find("throttled"), std::string::npos);
  result.throttled = {true, true, true, false};  // too few left: keep all, say so
  verdict = judge_timing(result, PhysicalFloor{}, TimingChecks{});
  EXPECT_EQ(verdict.samples_ms.size(), 4u);
  EXPECT_NE(verdict.warning.find("too few"), std::string::npos);
}

TEST(JudgeTiming, RuntimeErrorsPassThrough) {
  worker::TimeResult failed;
  failed.verdict = Verdict::runtime_error;
  failed.message = "timed call 3: kforge_run returned 2";
  EXPECT_EQ(judge_timing(failed, PhysicalFloor{}, TimingChecks{}).verdict, Verdict::runtime_error);
}

/// Rounds of `count` samples around `ms` with relative noise `noise` and per-round drift.
std::vector<std::vector<double>> rounds(double ms, double noise, std::mt19937_64& rng,
                                        int count = 10, int number = 5) {
  std::normal_distribution<double> jitter(0.0, noise);
  std::vector<std::vector<double>> result;
  for (int r = 0; r < number; ++r) {
    std::vector<double> round;
    for (int i = 0; i < count; ++i) round.push_back(ms * (1.0 + jitter(rng)));
    result.push_back(round);
  }
  return result;
}

TEST(JudgePaired, AnAAComparisonIsATieAndFivePercentSlowerIsDetected) {
  std::mt19937_64 rng(7);
  int ties = 0, detected = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const auto a = rounds(1.0, 0.01, rng);
    const auto b = rounds(1.0, 0.01, rng);
    ties += judge_paired(a, b, 0.95, 0.01, trial).outcome == PairedComparison::Outcome::tie;
    const auto slower = rounds(1.05, 0.01, rng);
    detected +=
        judge_paired(a, slower, 0.95, 0.01, trial).outcome == PairedComparison::Outcome::slower;
  }
  EXPECT_GE(ties, 95);
  EXPECT_GE(detected, 95);
}

TEST(JudgePaired, EstimateIsTheGeometricMeanOfRoundRatiosInsideItsInterval) {
  const std::vector<std::vector<double>> a = {{2.0, 2.0}, {4.0, 4.0}};
  const std::vector<std::vector<double>> b = {{1.0, 1.0}, {1.0, 1.0}};
  const PairedComparison comparison = judge_paired(a, b, 0.95, 0.01);
  EXPECT_NEAR(comparison.speedup.speedup, std::sqrt(2.0 * 4.0), 1e-12);
  EXPECT_EQ(comparison.round_ratios, (std::vector<double>{2.0, 4.0}));
  EXPECT_LE(comparison.speedup.ci_low, comparison.speedup.speedup);
  EXPECT_GE(comparison.speedup.ci_high, comparison.speedup.speedup);
  EXPECT_EQ(comparison.outcome, PairedComparison::Outcome::faster);
  EXPECT_EQ(to_string(comparison.outcome), "faster");
}

TEST(JudgePaired, MalformedRoundsThrow) {
  EXPECT_THROW(judge_paired({}, {}, 0.95, 0.01), Error);
  EXPECT_THROW(judge_paired({{1.0}}, {{1.0}, {1.0}}, 0.95, 0.01), Error);
  EXPECT_THROW(judge_paired({{1.0}}, {{}}, 0.95, 0.01), Error);
}

TEST(JudgeSpeedup, FasterOrSlowerOnlyWhenTheWholeIntervalClearsMinGain) {
  EXPECT_EQ(judge_speedup({1.10, 1.02, 1.20, 0.95}, 0.01), ComparisonOutcome::faster);
  EXPECT_EQ(judge_speedup({1.10, 1.005, 1.20, 0.95}, 0.01), ComparisonOutcome::tie);
  EXPECT_EQ(judge_speedup({0.90, 0.80, 0.985, 0.95}, 0.01), ComparisonOutcome::slower);
  EXPECT_EQ(judge_speedup({0.99, 0.80, 0.995, 0.95}, 0.01), ComparisonOutcome::tie);
  EXPECT_EQ(judge_speedup({1.00, 0.50, 2.00, 0.95}, 0.01), ComparisonOutcome::tie);
}

}  // namespace
}  // namespace kforge::evaluation

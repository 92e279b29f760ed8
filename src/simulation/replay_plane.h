// The evaluation plane and build queue of a simulated run: every rung answered from a measured
// space (space.h) instead of a device, with the measurement noise resampled from the recorded
// samples, and a simulated clock that advances by the seconds each recorded rung took. The
// Optimizer runs unchanged over them (its seams: evaluation::EvaluationPlane, BuildQueue,
// set_clock), so a simulated run makes the decisions a real run would make on timings drawn from
// the same distributions, for the device time the real rungs cost. Kernel Tuner's simulation
// mode replays its cache the same way (van Werkhoven et al., FGCS 2019), without the noise.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compile/compile_pool.h"
#include "core/task.h"
#include "evaluation/evaluator.h"
#include "simulation/space.h"
#include "worker/worker.h"

namespace kforge::simulation {

/// Seconds of simulated time, shared by the plane (which advances it) and the Optimizer (which
/// reads it through set_clock).
class SimulatedClock {
 public:
  double now_s() const { return now_s_; }
  void advance(double seconds) { now_s_ += seconds; }

 private:
  double now_s_ = 0.0;
};

/// Answers rungs 0-3 and acceptance comparisons from `space`:
/// - evaluate(): the point's recorded verdict (a build that failed is the artifact's verdict);
///   when correct, rung 1's samples are a bootstrap resample (same count, with replacement) of
///   the recorded ones, so two evaluations of one point differ as two real ones would;
/// - time_reference(): a resample of the reference's recorded rung-1 samples;
/// - full_rung(): per timed workload a resample of the recorded rung-2 samples, against the
///   recorded reference median;
/// - compare() and time_paired(): `compare_rounds` / `final_rounds` rounds of
///   `policy.round.max_repetitions` samples drawn from each side's recorded rung-1 samples, judged
///   by evaluation::judge_paired as the real plane judges them; compare_on() the same from the
///   recorded rung-2 samples of the workload.
/// - gate_at_full_size() (policy.defer_timed_gate, the ladder's): the point's recorded
///   timed-workload gate cases, once per handle, charged gate_full_size_s and failing where
///   they failed; full_rung(), compare(), compare_on() and time_paired() run it first, as the
///   Evaluator's do. Without deferral those seconds (and that failure) belong to rung 0.
/// Seconds: gate and quick rungs as recorded per point; a round costs its samples times the
/// point's recorded seconds per rung-1 sample. The clock advances by each, so budget limits in
/// device seconds hold in simulation as on the device. A point the space does not hold is a
/// harness error (Error naming its key): the space and the family's sources disagree.
class ReplayPlane : public evaluation::EvaluationPlane {
 public:
  /// `task` must be the task the space was measured for (its timed workload is copied from
  /// it); `seed` drives the noise resampling (same seed, same draws). Keeps a reference to
  /// `space` and `clock`.
  ReplayPlane(const Task& task, const SpaceRecord& space, evaluation::EvaluationPolicy policy,
              SimulatedClock& clock, uint64_t seed);

  evaluation::TaskReport prepare(const compile::Artifact& reference) override;
  std::string screen(const std::string& source, const std::string& source_name,
                     const std::string& backend) const override;
  evaluation::CandidateEvaluation evaluate(const compile::Artifact& artifact,
                                           worker::Worker& on) override;
  worker::LoadResult load(const compile::Artifact& artifact, worker::Worker& on) override;
  evaluation::TimingVerdict time_reference() override;
  FullSizeGate gate_at_full_size(int handle, worker::Worker& on) override;
  evaluation::FullRung full_rung(int handle, worker::Worker& on) override;
  void prime_full_rung_reference() override {}
  PairedSamples time_paired(int handle, worker::Worker& on) override;
  evaluation::CompareOutcome compare(int incumbent, int challenger, worker::Worker& on) override;
  evaluation::CompareOutcome compare_on(const std::string& workload, int incumbent,
                                        int challenger, worker::Worker& on) override;
  const Workload& timed_workload() const override { return timed_; }
  const evaluation::EvaluationPolicy& policy() const override { return policy_; }

  /// Device seconds the plane has charged so far (every rung and comparison).
  double device_s() const { return device_s_; }

 private:
  const PointRecord& point_of(const compile::Artifact& artifact) const;
  const PointRecord& loaded(int handle) const;
  std::vector<double> resample(const std::vector<double>& samples, size_t count);
  /// Seconds one rung-1 sample of `point` cost, from its recorded rung 1.
  static double seconds_per_sample(const PointRecord& point);
  /// Rounds of `per_round` samples drawn from `a_ms` and `b_ms`, judged by judge_paired; each
  /// round charged `a_s_per_sample` and `b_s_per_sample` per sample.
  evaluation::CompareOutcome paired_rounds(const std::vector<double>& a_ms,
                                           const std::vector<double>& b_ms, double a_s_per_sample,
                                           double b_s_per_sample);
  void charge(double seconds);

  const SpaceRecord& space_;
  evaluation::EvaluationPolicy policy_;
  SimulatedClock& clock_;
  std::mt19937_64 rng_;
  Workload timed_;
  std::map<int, const PointRecord*> handles_;
  std::map<int, FullSizeGate> full_size_gates_;  // gate_at_full_size()'s, per handle
  int next_handle_ = 0;
  double device_s_ = 0.0;
};

/// A build queue that "builds" at once: the artifact's key and path are job_key(job), what
/// ReplayPlane finds the point by, and its compile_s the point's recorded build seconds (0 when
/// the space does not hold it: the plane then reports the missing point).
class ReplayBuilds : public compile::BuildQueue {
 public:
  /// `toolchain` is reported as the run's (the space's).
  ReplayBuilds(const SpaceRecord& space, SimulatedClock& clock);
  std::future<compile::Artifact> submit(compile::CompileJob job) override;
  std::string toolchain(const std::string& backend) override;
  int submitted() const { return submitted_; }

 private:
  const SpaceRecord& space_;
  SimulatedClock& clock_;
  int submitted_ = 0;
};

/// A worker that is never asked to run anything: the replay plane answers every rung. Every
/// call but device_info() and shutdown() throws Error (a simulation that reaches a worker is a
/// bug in the seam, and must not pass as a measurement).
class IdleWorker : public worker::Worker {
 public:
  /// `device` is the space's device name, `backend` its backend.
  IdleWorker(std::string backend, std::string device);
  worker::DeviceInfo device_info() override;
  worker::LoadResult load(const worker::LoadRequest& request, double timeout_s) override;
  worker::RunResult run(const worker::RunRequest& request, double timeout_s) override;
  worker::TimeResult time(const worker::TimeRequest& request, double timeout_s) override;
  void shutdown() override {}

 private:
  std::string backend_;
  std::string device_;
};

}  // namespace kforge::simulation

#include "simulation/replay_plane.h"

#include <algorithm>
#include <cmath>
#include <future>

#include "common/error.h"
#include "evaluation/statistics.h"

namespace kforge::simulation {

ReplayPlane::ReplayPlane(const Task& task, const SpaceRecord& space,
                         evaluation::EvaluationPolicy policy, SimulatedClock& clock, uint64_t seed)
    : space_(space), policy_(std::move(policy)), clock_(clock), rng_(seed) {
  bool found = false;
  for (const Workload& w : task.workloads) {
    if (w.name == space_.timed_workload) {
      timed_ = w;
      found = true;
    }
  }
  if (!found) {
    throw Error("space of " + space_.task + ": timed workload '" + space_.timed_workload +
                "' is not a workload of task " + task.name);
  }
  if (space_.reference_quick_samples_ms.empty()) {
    throw Error("space of " + space_.task + ": no reference samples recorded");
  }
}

void ReplayPlane::charge(double seconds) {
  device_s_ += seconds;
  clock_.advance(seconds);
}

evaluation::TaskReport ReplayPlane::prepare(const compile::Artifact&) {
  evaluation::TaskReport report;
  report.device.backend = space_.backend;
  report.device.name = space_.device;
  return report;
}

std::string ReplayPlane::screen(const std::string&, const std::string&,
                                const std::string&) const {
  return "";  // the space's sources are the built-in families': the real screen passed them
}

const PointRecord& ReplayPlane::point_of(const compile::Artifact& artifact) const {
  const PointRecord* point = space_.find(artifact.key);
  if (point == nullptr) {
    throw Error("space of " + space_.task + " (" + space_.family + ", measured " +
                space_.measured_at + "): no point built as '" + artifact.key +
                "'; measure the space again for this version of the family");
  }
  return *point;
}

const PointRecord& ReplayPlane::loaded(int handle) const {
  auto found = handles_.find(handle);
  if (found == handles_.end()) throw Error("replay: unknown handle " + std::to_string(handle));
  return *found->second;
}

std::vector<double> ReplayPlane::resample(const std::vector<double>& samples, size_t count) {
  std::vector<double> drawn;
  if (samples.empty()) return drawn;
  std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
  drawn.reserve(count);
  for (size_t i = 0; i < count; ++i) drawn.push_back(samples[pick(rng_)]);
  return drawn;
}

double ReplayPlane::seconds_per_sample(const PointRecord& point) {
  if (point.quick_samples_ms.empty()) return 0.0;
  return point.quick_s / static_cast<double>(point.quick_samples_ms.size());
}

evaluation::CandidateEvaluation ReplayPlane::evaluate(const compile::Artifact& artifact,
                                                      worker::Worker&) {
  evaluation::CandidateEvaluation result;
  if (artifact.verdict != Verdict::ok) {
    result.verdict = artifact.verdict;
    result.message = artifact.log;
    return result;
  }
  const PointRecord& point = point_of(artifact);
  // Rung 0's seconds: the gate workloads' cases, and without deferral the timed workloads'
  // too, where a space measured with them deferred has them apart (in a space measured
  // before, gate_s holds them and gate_full_size_s is 0). The rung's record carries what was
  // charged: the search's budget (search device seconds) sums the records.
  const double gate_s =
      point.gate_s + (policy_.defer_timed_gate ? 0.0 : point.gate_full_size_s);
  charge(gate_s);
  if (!policy_.defer_timed_gate && point.gate_full_size_failed) {
    result.verdict = point.verdict;
    result.message = "recorded: " + point.message;
    result.rungs.push_back({Rung::gate, point.verdict, result.message, gate_s, {}});
    return result;
  }
  if (point.verdict != Verdict::ok && point.quick_samples_ms.empty()) {
    result.verdict = point.verdict;
    result.message = "recorded: " + point.message;
    result.rungs.push_back({Rung::gate, point.verdict, result.message, gate_s, {}});
    return result;
  }
  result.rungs.push_back({Rung::gate, Verdict::ok, "", gate_s, {}});
  charge(point.quick_s);
  if (point.verdict != Verdict::ok && !point.gate_full_size_failed) {
    // failed at rung 1 (an implausible timing, a crash)
    result.verdict = point.verdict;
    result.message = "recorded: " + point.message;
    result.rungs.push_back({Rung::quick, point.verdict, result.message, point.quick_s, {}});
    return result;
  }
  result.handle = next_handle_++;
  handles_[result.handle] = &point;
  result.samples_ms = resample(point.quick_samples_ms, point.quick_samples_ms.size());
  result.timing = evaluation::summarize(result.samples_ms);
  result.quick.samples_ms = result.samples_ms;
  result.quick.summary = result.timing;
  result.rungs.push_back({Rung::quick, Verdict::ok, "", point.quick_s, {}});
  return result;
}

worker::LoadResult ReplayPlane::load(const compile::Artifact& artifact, worker::Worker&) {
  worker::LoadResult result;
  const PointRecord& point = point_of(artifact);
  if (point.verdict != Verdict::ok) {
    result.verdict = point.verdict;
    result.message = "recorded: " + point.message;
    return result;
  }
  result.handle = next_handle_++;
  handles_[result.handle] = &point;
  return result;
}

evaluation::TimingVerdict ReplayPlane::time_reference() {
  evaluation::TimingVerdict verdict;
  verdict.samples_ms =
      resample(space_.reference_quick_samples_ms, space_.reference_quick_samples_ms.size());
  verdict.summary = evaluation::summarize(verdict.samples_ms);
  charge(space_.reference_quick_s);
  return verdict;
}

ReplayPlane::FullSizeGate ReplayPlane::gate_at_full_size(int handle, worker::Worker&) {
  if (!policy_.defer_timed_gate) return {};
  const PointRecord& point = loaded(handle);
  if (const auto found = full_size_gates_.find(handle); found != full_size_gates_.end()) {
    FullSizeGate earlier = found->second;
    earlier.ran = false;
    earlier.seconds = 0.0;
    return earlier;
  }
  FullSizeGate gate;
  gate.ran = true;
  gate.seconds = point.gate_full_size_s;
  charge(gate.seconds);
  if (point.gate_full_size_failed) {
    gate.verdict = point.verdict;
    gate.message = "recorded: " + point.message;
  }
  full_size_gates_[handle] = gate;
  return gate;
}

evaluation::FullRung ReplayPlane::full_rung(int handle, worker::Worker& on) {
  const PointRecord& point = loaded(handle);
  evaluation::FullRung full;
  if (const FullSizeGate gate = gate_at_full_size(handle, on); gate.verdict != Verdict::ok) {
    full.verdict = gate.verdict;
    full.message = gate.message;
    full.gate_failed = true;
    return full;
  }
  charge(point.full_s);
  if (point.full.empty()) {
    full.verdict = Verdict::runtime_error;
    full.message = "recorded: rung 2 was not measured for " + point.id;
    return full;
  }
  double log_sum = 0.0;
  for (const WorkloadTiming& timing : point.full) {
    evaluation::FullRung::Entry entry;
    entry.workload = timing.workload;
    entry.candidate.samples_ms = resample(timing.samples_ms, timing.samples_ms.size());
    entry.candidate.summary = evaluation::summarize(entry.candidate.samples_ms);
    entry.reference_median_ms = timing.reference_median_ms;
    entry.speedup = timing.reference_median_ms / entry.candidate.summary.median_ms;
    log_sum += std::log(entry.speedup);
    full.workloads.push_back(std::move(entry));
  }
  full.geomean_speedup = std::exp(log_sum / static_cast<double>(full.workloads.size()));
  return full;
}

ReplayPlane::PairedSamples ReplayPlane::time_paired(int handle, worker::Worker& on) {
  const PointRecord& point = loaded(handle);
  PairedSamples paired;
  if (const FullSizeGate gate = gate_at_full_size(handle, on); gate.verdict != Verdict::ok) {
    paired.failure = to_string(gate.verdict) + ": " + gate.message;
    return paired;
  }
  const size_t per_round = static_cast<size_t>(std::max(1, policy_.round.max_repetitions));
  for (int round = 0; round < policy_.final_rounds; ++round) {
    paired.reference_rounds.push_back(resample(space_.reference_quick_samples_ms, per_round));
    paired.candidate_rounds.push_back(resample(point.quick_samples_ms, per_round));
    charge(static_cast<double>(per_round) * seconds_per_sample(point));
  }
  return paired;
}

evaluation::CompareOutcome ReplayPlane::compare(int incumbent, int challenger, worker::Worker& on) {
  if (std::optional<evaluation::CompareOutcome> failed =
          evaluation::gates_before_comparing(*this, incumbent, challenger, on)) {
    return *failed;
  }
  const PointRecord& a = loaded(incumbent);
  const PointRecord& b = loaded(challenger);
  return paired_rounds(a.quick_samples_ms, b.quick_samples_ms, seconds_per_sample(a),
                       seconds_per_sample(b));
}

evaluation::CompareOutcome ReplayPlane::compare_on(const std::string& workload, int incumbent,
                                                   int challenger, worker::Worker& on) {
  if (std::optional<evaluation::CompareOutcome> failed =
          evaluation::gates_before_comparing(*this, incumbent, challenger, on)) {
    return *failed;
  }
  const auto recorded = [&](const PointRecord& point) -> const WorkloadTiming& {
    for (const WorkloadTiming& timing : point.full) {
      if (timing.workload == workload && !timing.samples_ms.empty()) return timing;
    }
    throw Error("simulation: no recorded rung-2 samples of " + point.id + " on '" + workload +
                "'");
  };
  // Seconds per rung-2 sample: the point's recorded rung 2 over all its samples.
  const auto per_sample = [](const PointRecord& point) {
    size_t samples = 0;
    for (const WorkloadTiming& timing : point.full) samples += timing.samples_ms.size();
    return samples == 0 ? 0.0 : point.full_s / static_cast<double>(samples);
  };
  const PointRecord& a = loaded(incumbent);
  const PointRecord& b = loaded(challenger);
  return paired_rounds(recorded(a).samples_ms, recorded(b).samples_ms, per_sample(a),
                       per_sample(b));
}

evaluation::CompareOutcome ReplayPlane::paired_rounds(const std::vector<double>& a_ms,
                                                      const std::vector<double>& b_ms,
                                                      double a_s_per_sample,
                                                      double b_s_per_sample) {
  const size_t per_round = static_cast<size_t>(std::max(1, policy_.round.max_repetitions));
  std::vector<std::vector<double>> a_rounds, b_rounds;
  for (int round = 0; round < policy_.compare_rounds; ++round) {
    a_rounds.push_back(resample(a_ms, per_round));
    b_rounds.push_back(resample(b_ms, per_round));
    charge(static_cast<double>(per_round) * (a_s_per_sample + b_s_per_sample));
  }
  evaluation::CompareOutcome outcome;
  outcome.paired = evaluation::judge_paired(a_rounds, b_rounds, policy_.acceptance_level,
                                            policy_.min_gain, rng_());
  return outcome;
}

ReplayBuilds::ReplayBuilds(const SpaceRecord& space, SimulatedClock& clock)
    : space_(space), clock_(clock) {}

std::future<compile::Artifact> ReplayBuilds::submit(compile::CompileJob job) {
  ++submitted_;
  compile::Artifact artifact;
  artifact.key = job_key(job);
  artifact.path = artifact.key;
  if (const PointRecord* point = space_.find(artifact.key)) {
    artifact.compile_s = point->compile_s;
    if (point->verdict == Verdict::compile_error) {
      artifact.verdict = Verdict::compile_error;
      artifact.log = "recorded: " + point->message;
    }
  }
  std::promise<compile::Artifact> built;
  built.set_value(std::move(artifact));
  return built.get_future();
}

std::string ReplayBuilds::toolchain(const std::string&) { return space_.toolchain; }

IdleWorker::IdleWorker(std::string backend, std::string device)
    : backend_(std::move(backend)), device_(std::move(device)) {}

worker::DeviceInfo IdleWorker::device_info() {
  worker::DeviceInfo info;
  info.backend = backend_;
  info.name = device_;
  info.memory_bytes = int64_t{1} << 40;
  return info;
}

worker::LoadResult IdleWorker::load(const worker::LoadRequest&, double) {
  throw Error("simulation: a worker was asked to load a kernel (the replay plane answers every "
              "rung; this is a bug in the seam)");
}

worker::RunResult IdleWorker::run(const worker::RunRequest&, double) {
  throw Error("simulation: a worker was asked to run a kernel (the replay plane answers every "
              "rung; this is a bug in the seam)");
}

worker::TimeResult IdleWorker::time(const worker::TimeRequest&, double) {
  throw Error("simulation: a worker was asked to time a kernel (the replay plane answers every "
              "rung; this is a bug in the seam)");
}

}  // namespace kforge::simulation

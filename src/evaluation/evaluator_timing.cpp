// The Evaluator's timing rungs (evaluator.h): the timing requests and their checked calls, the
// reference's times, rung 2 over every timed workload, rung 3's interleaved rounds with the
// reference (and torch.compile), and the acceptance comparison. Split from evaluator.cpp, which
// keeps preparing the task and the gate.
#include "evaluation/evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/scratch_release.h"
#include "worker/kernel_runner.h"

namespace kforge::evaluation {
worker::TimeRequest Evaluator::time_request(int handle, const Workload& workload,
                                            const worker::MeasurementPolicy& measurement,
                                            uint64_t seed) const {
  worker::TimeRequest request;
  request.handle = handle;
  request.signature = task_.signature;
  request.workload = workload;
  request.seed = seed;
  request.distribution = task_.distributions.front();
  request.input_sets = input_sets_for(workload);
  request.policy = measurement;
  request.flush_l2 = policy_.flush_l2;
  request.provided_dir = oracle_->provided_dir();
  return request;
}

void Evaluator::prime_check_outputs(const Workload& workload) {
  if (!policy_.recheck_timed_outputs) return;
  // The worker may hold fewer sets than asked (memory): those it holds are a prefix of these.
  for (int s = 0; s < input_sets_for(workload); ++s) {
    GateCase gate_case;
    gate_case.workload = workload;
    gate_case.seed = timing_seed_ + static_cast<uint64_t>(s);
    gate_case.distribution = task_.distributions.front();
    oracle_->expected(gate_case);
  }
}

Evaluator::CheckedTiming Evaluator::time_with_checks(
    worker::Worker& on, int handle, const Workload& workload,
    const worker::MeasurementPolicy& measurement, uint64_t seed, int checks,
    const std::string& timing_name) {
  worker::TimeRequest request = time_request(handle, workload, measurement, seed);
  if (!policy_.recheck_timed_outputs || checks <= 0) {
    return {on.time(request, policy_.time_timeout_s), Verdict::ok, ""};
  }
  request.checks = checks_->plan(timed_case(workload.name), measurement, checks);
  request.verified = checks_->verified(workload);
  request.check_path = scratch_->next_file("check");
  // Removed on a background thread when the timing ends (scratch_release.h).
  ReleaseLater release;
  for (size_t k = 0; k < request.checks.size(); ++k) {
    release.paths.push_back(worker::check_file(request.check_path, k));
    create_private_file(release.paths.back());
  }
  CheckedTiming timing{on.time(request, policy_.time_timeout_s), Verdict::ok, ""};
  const worker::TimeResult& result = timing.result;
  if (result.verdict != Verdict::ok) return timing;
  const std::string where = "the " + timing_name + " timing on '" + workload.name + "': ";
  if (!result.foreign_work.empty()) {
    timing.verdict = Verdict::rejected_by_policy;
    timing.failure = where + "work outside args->stream: " + result.foreign_work +
                     " (launch every kernel, copy and memset on args->stream: the timing "
                     "events there do not see work elsewhere)";
  } else if (!result.guard_violation.empty()) {
    timing.verdict = Verdict::wrong_answer;
    timing.failure = where + "the kernel " + result.guard_violation +
                     " (into the guard band beside its storage): kernels must write only "
                     "inside their outputs";
  } else if (std::string failure = checks_->verify(request, result, timing_name);
             !failure.empty()) {
    timing.verdict = Verdict::wrong_answer;
    timing.failure = std::move(failure);
  }
  return timing;
}

TimingVerdict Evaluator::time_checked(worker::Worker& on, int handle, const Workload& workload,
                                      const worker::MeasurementPolicy& measurement,
                                      uint64_t seed, int checks, Rung rung) {
  const CheckedTiming timing =
      time_with_checks(on, handle, workload, measurement, seed, checks, to_string(rung));
  TimingVerdict verdict = judge_timing(
      timing.result, physical_floor(task_, workload, device_, policy_.checks.floor_slack),
      policy_.checks);
  if (timing.verdict != Verdict::ok) {
    verdict.verdict = timing.verdict;
    verdict.message = timing.failure;
  }
  return verdict;
}

Evaluator::Interleaved Evaluator::time_interleaved(worker::Worker& on, int handle,
                                                   const Workload& workload,
                                                   const worker::MeasurementPolicy& per_round,
                                                   const std::vector<int>& checks, Rung rung) {
  Interleaved timed;
  const auto reference_round = [&] {
    const auto started = std::chrono::steady_clock::now();
    timed.reference_rounds_ms.push_back(
        time_reference_samples(workload, policy_.quick_reference).samples_ms);
    timed.reference_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<double> samples;
  for (size_t round = 0; round < checks.size(); ++round) {
    reference_round();
    TimingVerdict verdict =
        time_checked(on, handle, workload, per_round, timing_seed_, checks[round], rung);
    if (verdict.verdict != Verdict::ok) {
      timed.candidate = std::move(verdict);
      return timed;
    }
    samples.insert(samples.end(), verdict.samples_ms.begin(), verdict.samples_ms.end());
    if (round == 0) {
      timed.candidate = std::move(verdict);
    } else {
      timed.candidate.throttled_dropped += verdict.throttled_dropped;
      timed.candidate.slow_warmup = timed.candidate.slow_warmup || verdict.slow_warmup;
      if (timed.candidate.warning.empty()) timed.candidate.warning = verdict.warning;
    }
  }
  reference_round();
  timed.candidate.samples_ms = std::move(samples);
  timed.candidate.summary = summarize(timed.candidate.samples_ms);
  return timed;
}

TimingVerdict Evaluator::time_quick_in_window(worker::Worker& on, int handle,
                                              std::optional<QuickReference>& window) {
  // The quick rung's checked calls all go to its last round, as they went to its one request
  // before it interleaved: a request of two or more checks holds both kinds (the set's own
  // values and new values written over a set, plan_timed_checks), and spreading them one per
  // round left 1 in 4 candidates with own-value checks only, which a kernel that replays its
  // first result passes when the check lands on the set it cached (corpus caches_copy.py).
  // Under defer_timed_gate no call is checked: the timed workload's outputs are checked when
  // the candidate reaches a rung that decides (gate_at_full_size), and this rung's time only
  // ranks it for promotion.
  const int rounds = std::max(1, policy_.quick_rounds);
  std::vector<int> checks(static_cast<size_t>(rounds), 0);
  checks.back() = policy_.defer_timed_gate ? 0 : policy_.checks_per_request;
  Interleaved timed = time_interleaved(on, handle, timed_workload_,
                                       quick_round_measurement(policy_), checks, Rung::quick);
  if (timed.candidate.verdict != Verdict::ok || timed.candidate.samples_ms.empty()) {
    return std::move(timed.candidate);
  }
  QuickReference reference;
  reference.rounds_ms = std::move(timed.reference_rounds_ms);
  reference.candidate_rounds = rounds;
  const std::vector<double> pooled = reference.samples_ms();
  reference.median_ms = median(pooled);
  reference.speedup = estimate_speedup(pooled, timed.candidate.samples_ms,
                                       policy_.acceptance_level, 2000, policy_.gate.base_seed);
  reference.outcome = judge_speedup(reference.speedup, policy_.min_gain);
  reference.seconds = timed.reference_seconds;
  window = std::move(reference);
  return std::move(timed.candidate);
}

worker::TimeResult Evaluator::time_reference_samples(const worker::MeasurementPolicy& measurement) {
  return time_reference_samples(timed_workload_, measurement);
}

worker::TimeResult Evaluator::time_reference_samples(
    const Workload& workload, const worker::MeasurementPolicy& measurement) {
  std::lock_guard lock(reference_timing_);
  worker::TimeResult result = reference_worker_.time(
      time_request(oracle_->handle(), workload, measurement, timing_seed_),
      policy_.time_timeout_s);
  if (result.verdict != Verdict::ok) {
    throw Error("timing the reference on '" + workload.name + "' failed: " +
                to_string(result.verdict) + ": " + result.message);
  }
  return result;
}

TimingVerdict Evaluator::time_reference() {
  const worker::TimeResult result = time_reference_samples(policy_.quick);
  TimingVerdict verdict =
      judge_timing(result, physical_floor(task_, timed_workload_, device_, policy_.checks.floor_slack),
                   policy_.checks);
  if (verdict.verdict != Verdict::ok) {
    // The reference is trusted: a failed plausibility check there means the task's bytes or
    // FLOPs formula overstates the work. Say so, but keep the time.
    verdict.warning = "the reference itself fails a timing check (" + verdict.message +
                      "): check the task's bytes/flops formulas";
    verdict.verdict = Verdict::ok;
    verdict.message.clear();
  }
  return verdict;
}

void Evaluator::prime_full_rung_reference() {
  if (full_rung_primed_) return;
  for (const Workload& workload : task_.workloads) {
    if (workload.timed) prime_check_outputs(workload);
  }
  full_rung_primed_ = true;
}

worker::MeasurementPolicy full_round_measurement(const EvaluationPolicy& policy) {
  const int rounds = std::max(1, policy.full_rounds);
  worker::MeasurementPolicy round = policy.full;
  round.min_repetitions = std::max(5, policy.full.min_repetitions / rounds);
  round.max_repetitions = std::max(round.min_repetitions, policy.full.max_repetitions / rounds);
  round.max_seconds = policy.full.max_seconds / rounds;
  return round;
}

worker::MeasurementPolicy quick_round_measurement(const EvaluationPolicy& policy) {
  const int rounds = std::max(1, policy.quick_rounds);
  worker::MeasurementPolicy round = policy.quick;
  round.warmup = policy.quick_reference.warmup;
  round.min_repetitions = std::max(4, (policy.quick.min_repetitions + rounds - 1) / rounds);
  round.max_repetitions = round.min_repetitions;
  round.max_seconds = policy.quick.max_seconds / rounds;
  return round;
}

FullRung Evaluator::full_rung(int handle) { return full_rung(handle, candidates_); }

FullRung Evaluator::full_rung(int handle, worker::Worker& on) {
  prime_full_rung_reference();
  const int rounds = std::max(1, policy_.full_rounds);
  const worker::MeasurementPolicy per_round = full_round_measurement(policy_);
  FullRung rung;
  if (const FullSizeGate gate = gate_at_full_size(handle, on); gate.verdict != Verdict::ok) {
    rung.verdict = gate.verdict;
    rung.message = gate.message;
    rung.gate_failed = true;
    return rung;
  }
  double log_sum = 0.0;
  const std::vector<int> checks(static_cast<size_t>(rounds), policy_.checks_per_request);
  for (const Workload& workload : task_.workloads) {
    if (!workload.timed) continue;
    FullRung::Entry entry;
    entry.workload = workload.name;
    Interleaved timed = time_interleaved(on, handle, workload, per_round, checks, Rung::full);
    entry.reference_rounds_ms = std::move(timed.reference_rounds_ms);
    entry.candidate = std::move(timed.candidate);
    if (entry.candidate.verdict != Verdict::ok) {
      rung.verdict = entry.candidate.verdict;
      rung.message = "workload '" + workload.name + "': " + entry.candidate.message;
      rung.workloads.push_back(std::move(entry));
      return rung;
    }
    entry.reference_median_ms = median(pooled_rounds(entry.reference_rounds_ms));
    entry.speedup = entry.reference_median_ms / entry.candidate.summary.median_ms;
    log_sum += std::log(entry.speedup);
    rung.workloads.push_back(std::move(entry));
  }
  rung.geomean_speedup = std::exp(log_sum / static_cast<double>(rung.workloads.size()));
  return rung;
}

Evaluator::PairedSamples Evaluator::time_paired(int candidate_handle) {
  return time_paired(candidate_handle, candidates_);
}

Evaluator::PairedSamples Evaluator::time_paired(int candidate_handle, worker::Worker& on) {
  PairedSamples paired;
  if (const FullSizeGate gate = gate_at_full_size(candidate_handle, on);
      gate.verdict != Verdict::ok) {
    paired.failure = to_string(gate.verdict) + ": " + gate.message;
    return paired;
  }
  bool compiled = policy_.baseline == BaselineKind::compile;
  enum class Turn { reference, candidate, compiled };
  for (int round = 0; round < policy_.final_rounds; ++round) {
    std::vector<Turn> turns = {Turn::reference, Turn::candidate};
    if (compiled) {
      turns.push_back(Turn::compiled);
      std::rotate(turns.begin(), turns.begin() + round % 3, turns.end());
    }
    for (const Turn turn : turns) {
      if (turn == Turn::compiled) {
        if (!compiled) continue;  // failed earlier in this round
        std::optional<std::vector<double>> samples = time_compiled_reference(paired.compile_failure);
        if (samples) {
          paired.compile_rounds.push_back(std::move(*samples));
        } else {
          compiled = false;
          paired.compile_rounds.clear();
        }
        continue;
      }
      if (turn == Turn::reference) {
        paired.reference_rounds.push_back(time_reference_samples(policy_.round).samples_ms);
        continue;
      }
      const CheckedTiming timing = time_with_checks(on, candidate_handle, timed_workload_,
                                                    policy_.round, timing_seed_,
                                                    policy_.checks_per_round,
                                                    to_string(Rung::final));
      const worker::TimeResult& candidate = timing.result;
      if (candidate.verdict != Verdict::ok || timing.verdict != Verdict::ok) {
        paired.failure = timing.verdict == Verdict::ok
                             ? to_string(candidate.verdict) + ": " + candidate.message
                             : to_string(timing.verdict) + ": " + timing.failure;
        paired.candidate_rounds.clear();
        return paired;
      }
      paired.candidate_rounds.push_back(candidate.samples_ms);
    }
  }
  return paired;
}

CompareOutcome Evaluator::compare(int incumbent, int challenger) {
  return compare(incumbent, challenger, candidates_);
}

CompareOutcome Evaluator::compare(int incumbent, int challenger, worker::Worker& on) {
  return compare_rounds(timed_workload_, incumbent, challenger, on, "acceptance");
}

CompareOutcome Evaluator::compare_on(const std::string& workload, int incumbent, int challenger,
                                     worker::Worker& on) {
  for (const Workload& w : task_.workloads) {
    if (w.name != workload || !w.timed) continue;
    prime_check_outputs(w);  // done by rung 2 already: a cache hit
    return compare_rounds(w, incumbent, challenger, on, "rung-2 challenge");
  }
  throw Error("compare_on: '" + workload + "' is not a timed workload of task " + task_.name);
}

CompareOutcome Evaluator::compare_rounds(const Workload& workload, int incumbent, int challenger,
                                         worker::Worker& on, const std::string& timing_name) {
  if (std::optional<CompareOutcome> failed =
          gates_before_comparing(*this, incumbent, challenger, on)) {
    return *failed;
  }
  CompareOutcome outcome;
  std::vector<std::vector<double>> incumbent_rounds, challenger_rounds;
  for (int round = 0; round < policy_.compare_rounds; ++round) {
    // Alternate who goes first, so that an order effect (warm clocks) favours neither.
    const bool incumbent_first = round % 2 == 0;
    for (int turn = 0; turn < 2; ++turn) {
      const bool incumbent_turn = (turn == 0) == incumbent_first;
      const int handle = incumbent_turn ? incumbent : challenger;
      const CheckedTiming timing = time_with_checks(on, handle, workload, policy_.round,
                                                    timing_seed_, policy_.checks_per_round,
                                                    timing_name);
      if (timing.result.verdict != Verdict::ok || timing.verdict != Verdict::ok) {
        outcome.failed_handle = handle;
        const bool checked = timing.verdict != Verdict::ok;
        outcome.verdict = checked ? timing.verdict : timing.result.verdict;
        outcome.message = checked ? timing.failure : timing.result.message;
        return outcome;
      }
      (incumbent_turn ? incumbent_rounds : challenger_rounds).push_back(timing.result.samples_ms);
    }
  }
  outcome.paired = judge_paired(incumbent_rounds, challenger_rounds, policy_.acceptance_level,
                                policy_.min_gain, policy_.gate.base_seed);
  return outcome;
}

}  // namespace kforge::evaluation

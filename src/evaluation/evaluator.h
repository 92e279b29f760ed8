// The evaluation gate and timing rungs, run from the orchestrator through the Worker seam.
//
// Gate (DESIGN.md "Evaluation plane"): compiled artifact -> load (entry point and ABI present)
// -> correctness against the reference on every gate workload x `seeds` seeds plus the timed
// workloads x 1 seed, outputs poisoned and inputs verified by the worker -> timing. Every
// candidate failure comes back as a Verdict; only harness failures throw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "evaluation/statistics.h"
#include "task/task.h"
#include "worker/worker.h"

namespace kforge::evaluation {

/// Measurement policy: named, unit-suffixed knobs for the gate and each rung.
struct EvaluationPolicy {
  int seeds = 3;                    // correctness seeds per gate workload
  uint64_t base_seed = 20261129;    // seeds are base_seed + i: fixed per run, recorded
  double load_timeout_s = 60.0;
  double check_timeout_s = 300.0;
  double time_timeout_s = 300.0;
  int quick_warmup = 2;             // rung 1: quick timing on the timed workload
  int quick_repetitions = 10;
  int final_rounds = 5;             // final rung: reference and best interleaved, per round
  int final_warmup = 3;
  int final_repetitions = 10;       // per round and kernel
  bool flush_l2 = true;             // cuda: flush L2 before each timed call
  double max_time_per_request_s = 30.0;
};

/// Everything learned about one candidate.
struct CandidateEvaluation {
  Verdict verdict = Verdict::ok;
  std::string message;              // why it failed, or empty
  int handle = -1;                  // worker handle when loaded
  worker::CheckResult check;
  std::vector<double> samples_ms;   // quick-rung samples on the timed workload
  SampleSummary timing;
};

class Evaluator {
 public:
  Evaluator(worker::Worker& worker, const Task& task, EvaluationPolicy policy);

  /// Loads and gate-checks the reference against itself, then returns its handle. Throws Error
  /// when the reference does not load, crashes or disagrees with itself: the task is broken.
  int prepare_reference(const compile::Artifact& reference);

  /// Gate + quick timing of one compiled candidate.
  CandidateEvaluation evaluate(const compile::Artifact& artifact);

  /// Times `handle` on the timed workload with the quick rung's settings.
  worker::TimeResult time_quick(int handle);

  /// Final rung: `final_rounds` rounds, each timing the reference then the candidate, so slow
  /// drift (clocks, temperature, other load) affects both alike. Returns {reference, candidate}
  /// samples. Throws Error if the reference fails; a failing candidate yields empty samples and
  /// the message in `failure`.
  struct PairedSamples {
    std::vector<double> reference_ms;
    std::vector<double> candidate_ms;
    std::string failure;
  };
  PairedSamples time_paired(int reference_handle, int candidate_handle);

  const Workload& timed_workload() const { return timed_workload_; }
  const EvaluationPolicy& policy() const { return policy_; }

 private:
  CandidateEvaluation evaluate_loaded(int handle);
  worker::CheckRequest check_request(int candidate_handle) const;
  worker::TimeRequest time_request(int handle, int warmup, int repetitions) const;

  worker::Worker& worker_;
  const Task& task_;
  EvaluationPolicy policy_;
  Workload timed_workload_;
  int reference_handle_ = -1;
};

}  // namespace kforge::evaluation

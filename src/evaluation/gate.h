// Rung 0, the correctness gate, judged in the orchestrator (DESIGN.md "Evaluation plane", 4).
//
// For each case the candidate worker runs the candidate on inputs made from the case's seed and
// distribution, with outputs poisoned (NaN) before each call, and leaves the outputs in a file;
// the orchestrator compares them with the reference oracle's (comparison.h: per-element
// tolerance, norm-wise bound, NaN/Inf positions). A case fails on the first of: a runtime
// failure, work outside args->stream (rejected_by_policy; the worker's work audit), a modified
// input, an output that changed after the call returned, a wrong output in
// either call (two calls on gate workloads: a race that passes once is caught the other time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/scratch_dir.h"
#include "evaluation/comparison.h"
#include "evaluation/precision.h"
#include "evaluation/reference_oracle.h"
#include "core/task.h"
#include "worker/worker.h"

namespace kforge::evaluation {

/// How the gate is planned.
struct GatePlan {
  int seeds = 3;                 // seeds per gate workload (distributions cycle over them)
  uint64_t base_seed = 20261129;
  /// Timed workloads whose outputs are at most this big are called twice in the gate too.
  int64_t two_call_limit_bytes = int64_t{256} << 20;
  /// Distributions the gate adds to every task that does not list them, once per gate workload:
  /// a few large elements at random positions (host_data.h), so that a reduction that reads a
  /// subsample, half the rows or clips outliers fails even where the task lists only
  /// uniform/normal data. Evaluator::prepare drops one, with a warning, where the reference's
  /// outputs are not finite on it (e.g. exp of large inputs).
  std::vector<std::string> adversarial_distributions = {"pareto", "spike"};
};

/// The seed of case `case_index` of workload `workload_name` under the run's `base_seed`: a hash
/// of all three, so no two workloads (whose inputs are prefixes of each other under one seed)
/// share inputs, and a run stays reproducible from its base seed.
uint64_t workload_seed(uint64_t base_seed, const std::string& workload_name, uint64_t case_index);

/// Rung 0's cases for `task`: every gate (untimed) workload x `plan.seeds` seeds, the n-th gate
/// case overall drawing from task.distributions[n % size] (so every distribution is drawn once
/// there are size / seeds gate workloads), two calls each and a late-write check; every gate
/// workload once per adversarial distribution the task does not list (two calls, `adversarial`
/// set); when an input is `strided`, every gate workload once more with non-contiguous inputs;
/// then every timed workload once (the next listed distribution in turn; two calls up to
/// two_call_limit_bytes of outputs), as a kernel wrong only at full size must not pass either.
/// Every seed is workload_seed(plan.base_seed, workload, case number within the workload).
std::vector<GateCase> plan_gate(const Task& task, const GatePlan& plan);

/// What the gate found.
struct GateOutcome {
  Verdict verdict = Verdict::ok;
  std::string message;         // first failure, naming the case, call, tensor and index
  int cases_checked = 0;       // cases that passed
  double max_abs_error = 0.0;  // over every output of every passed case
  double max_rel_error = 0.0;
  double max_normalized_error = 0.0;
  bool calls_bitwise_equal = true;  // every two-call case gave identical bytes twice
  double worker_seconds = 0.0;      // wall time in the candidate worker (runs, read-backs)
  double worker_input_seconds = 0.0;   // of which making and uploading inputs
  double worker_output_seconds = 0.0;  // of which reading outputs back into the files
  double worker_check_seconds = 0.0;   // of which the late-write and unchanged-input checks
  double compare_seconds = 0.0;     // wall time comparing in the orchestrator
  double reference_seconds = 0.0;   // wall time getting expected outputs (first use only)
  /// Output digests (worker::output_digest) of the passed cases of timed workloads, with the
  /// inputs they were computed on: the timing's checked calls on the same inputs need not read
  /// back outputs with these digests again (TimedChecks::add_verified).
  struct VerifiedOutput {
    std::string workload;
    uint64_t seed = 0;
    std::string distribution;
    uint64_t digest = 0;
  };
  std::vector<VerifiedOutput> verified;
};

/// Whether an fp32 output that missed the per-element tolerance on one of the gate's own
/// heavy-tailed cases (GateCase::adversarial: pareto, spike) still passes, judged in aggregate:
/// only some elements failed (`comparison.mismatched_elements` > 0), none of them by a NaN or inf,
/// the norm-wise bound held, and the fp32 precision rule (`precision`, check_precision) passed,
/// whether it applied or not (it does not where the fp32 model is exact to rounding in RMS, as
/// sums of a few terms of 1e2-1e4 often are). There, terms that cancel leave single elements
/// whose fp32 error depends on the order of the sum, and the model's order can be lucky exactly
/// there: on an H100 and an H200, KernelBench L1/73's two honest transposed convolutions gave the
/// same value 4.7e-5 off at one element of 2.27M where cuDNN was within 1e-6; L1/97's fp32 and
/// 3xTF32 attentions were 1e-3 relative off on rows of ~1e4 logits. Uniform and normal cases
/// keep every element to the tolerance, and TF32 arithmetic still fails the rule there. False
/// when the element tolerance passed (nothing to accept) or `precision` is null (no fp32 model).
bool heavy_tailed_output_passes(const OutputComparison& comparison,
                                const PrecisionCheck* precision);

/// Runs every case of `cases` on candidate `handle` in `worker`, stopping at the first failure.
/// Throws Error only for harness failures (a broken reference, an unwritable scratch dir).
GateOutcome run_gate(worker::Worker& worker, int handle, ReferenceOracle& oracle,
                     const Task& task, const std::vector<GateCase>& cases, ScratchDir& scratch,
                     double timeout_s);

}  // namespace kforge::evaluation

#include "evaluation/gate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/scratch_release.h"
#include "evaluation/comparison.h"
#include "evaluation/precision.h"
#include "evaluation/tolerance.h"
#include "worker/host_data.h"
#include "worker/input_generator.h"

namespace kforge::evaluation {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

namespace {

/// Only some elements missed the tolerance, none by a NaN or inf, and the norm-wise bound held.
bool element_only_miss(const OutputComparison& comparison) {
  return !comparison.passed && comparison.norm_passed && comparison.nonfinite_mismatches == 0 &&
         comparison.mismatched_elements > 0;
}

}  // namespace

bool heavy_tailed_output_passes(const OutputComparison& comparison,
                                const PrecisionCheck* precision) {
  return precision != nullptr && element_only_miss(comparison) && precision->passed;
}

uint64_t workload_seed(uint64_t base_seed, const std::string& workload_name, uint64_t case_index) {
  // FNV-1a over the name (Fowler, Noll, Vo), then SplitMix64 to mix it with the base seed.
  uint64_t name_hash = 0xCBF29CE484222325ULL;
  for (const unsigned char c : workload_name) name_hash = (name_hash ^ c) * 0x100000001B3ULL;
  return worker::generator::splitmix64(worker::generator::splitmix64(base_seed ^ name_hash) +
                                       case_index);
}

std::vector<GateCase> plan_gate(const Task& task, const GatePlan& plan) {
  if (task.distributions.empty()) throw Error(task.source_path + ": no input distributions");
  std::vector<GateCase> cases;
  size_t turn = 0;
  // The distributions cycle over the gate cases in order, continuing from one workload to the
  // next: with more distributions than seeds per workload (e.g. a norm's four, "small" for its
  // eps) every one is still drawn once there are enough gate workloads.
  size_t drawn = 0;
  for (const Workload& workload : task.workloads) {
    if (workload.timed) continue;
    for (int k = 0; k < plan.seeds; ++k) {
      GateCase gate_case;
      gate_case.workload = workload;
      gate_case.seed = workload_seed(plan.base_seed, workload.name, static_cast<uint64_t>(k));
      gate_case.distribution = task.distributions[drawn++ % task.distributions.size()];
      gate_case.calls = 2;
      gate_case.late_write_check = true;
      cases.push_back(std::move(gate_case));
    }
  }
  // Heavy tails and sparse spikes on every gate workload, whatever the task lists: the cases
  // that tell a full reduction from one over a subsample.
  for (const Workload& workload : task.workloads) {
    if (workload.timed) continue;
    uint64_t case_number = 100;  // after the listed seeds' case numbers
    for (const std::string& distribution : plan.adversarial_distributions) {
      const bool listed = std::find(task.distributions.begin(), task.distributions.end(),
                                    distribution) != task.distributions.end();
      if (listed) continue;
      GateCase gate_case;
      gate_case.workload = workload;
      gate_case.seed = workload_seed(plan.base_seed, workload.name, case_number++);
      gate_case.distribution = distribution;
      gate_case.calls = 2;
      gate_case.adversarial = true;
      cases.push_back(std::move(gate_case));
    }
  }
  // Tasks whose kernels take strided inputs: each gate workload once more, non-contiguous.
  const bool strided = std::any_of(task.signature.tensors.begin(), task.signature.tensors.end(),
                                   [](const TensorSpec& spec) { return spec.strided; });
  for (const Workload& workload : task.workloads) {
    if (workload.timed || !strided) continue;
    GateCase gate_case;
    gate_case.workload = workload;
    gate_case.seed = workload_seed(plan.base_seed, workload.name, 500);
    gate_case.distribution = task.distributions.back();
    gate_case.calls = 2;
    gate_case.padded = true;
    cases.push_back(std::move(gate_case));
  }
  for (const Workload& workload : task.workloads) {
    if (!workload.timed) continue;
    GateCase gate_case;
    gate_case.workload = workload;
    gate_case.seed = workload_seed(plan.base_seed, workload.name, 1000);
    gate_case.distribution = task.distributions[turn++ % task.distributions.size()];
    // Two calls where the outputs are small enough to read back twice cheaply: races often
    // show only at full size, where many threads contend.
    int64_t output_bytes = 0;
    for (const OutputLayout& output : output_layout(task.signature, workload)) {
      output_bytes += output.bytes;
    }
    gate_case.calls = output_bytes <= plan.two_call_limit_bytes ? 2 : 1;
    cases.push_back(std::move(gate_case));
  }
  return cases;
}

GateOutcome run_gate(worker::Worker& worker, int handle, ReferenceOracle& oracle,
                     const Task& task, const std::vector<GateCase>& cases, ScratchDir& scratch,
                     double timeout_s) {
  GateOutcome outcome;
  const auto fail = [&outcome](Verdict verdict, const std::string& message) {
    outcome.verdict = verdict;
    outcome.message = message;
    return outcome;
  };
  for (const GateCase& gate_case : cases) {
    auto start = Clock::now();
    const ExpectedOutputs& expected = oracle.expected(gate_case);
    outcome.reference_seconds += seconds_since(start);

    start = Clock::now();
    worker::RunRequest request;
    request.handle = handle;
    request.signature = task.signature;
    request.workload = gate_case.workload;
    request.seed = gate_case.seed;
    request.distribution = gate_case.distribution;
    request.calls = gate_case.calls;
    request.padded = gate_case.padded;
    request.late_write_wait_ms = gate_case.late_write_check ? 2.0 : 0.0;
    request.digest = gate_case.workload.timed && !gate_case.padded;
    request.provided_dir = oracle.provided_dir();
    request.output_path = scratch.next_file("candidate");
    create_private_file(request.output_path);
    // Unmapped and removed on a background thread when the case ends (scratch_release.h):
    // the gigabytes of pages of a timed case are freed off the critical path.
    ReleaseLater release{request.output_path};
    worker::RunResult run = worker.run(request, timeout_s);
    outcome.worker_seconds += seconds_since(start);
    outcome.worker_input_seconds += run.input_ms / 1e3;
    outcome.worker_output_seconds += run.output_ms / 1e3;
    outcome.worker_check_seconds += run.check_ms / 1e3;
    const std::string where = gate_case.label();
    if (run.verdict != Verdict::ok) return fail(run.verdict, where + ": " + run.message);
    if (!run.guard_violation.empty()) {
      return fail(Verdict::wrong_answer,
                  where + ": the kernel " + run.guard_violation +
                      " (into the guard band beside its storage): kernels must write only "
                      "inside their outputs");
    }
    if (!run.foreign_work.empty()) {
      return fail(Verdict::rejected_by_policy,
                  where + ": work outside args->stream: " + run.foreign_work +
                      " (launch every kernel, copy and memset on args->stream: the timing "
                      "events there do not see work elsewhere)");
    }
    if (!run.input_modified.empty()) {
      return fail(Verdict::wrong_answer, where + ": input " + run.input_modified +
                                             " was modified (kernels must not write their inputs)");
    }
    if (!run.late_write.empty()) {
      return fail(Verdict::wrong_answer,
                  where + ": output " + run.late_write +
                      " changed after kforge_run returned and the device was idle: work must be "
                      "finished (or queued on args->stream) when kforge_run returns");
    }
    if (run.output_bytes != expected.output_bytes || run.calls_completed != gate_case.calls) {
      throw Error("gate: the candidate worker returned " + std::to_string(run.output_bytes) +
                  " output bytes x " + std::to_string(run.calls_completed) + " calls, expected " +
                  std::to_string(expected.output_bytes) + " x " + std::to_string(gate_case.calls));
    }

    // The fp32 precision rule's model outputs (gate workloads only: small, and the rule's ratio
    // does not depend on size), computed before the clock for the comparison starts.
    const ExpectedOutputs* model = nullptr;
    if (task.precision == "fp32" && oracle.has_fp32_model() && !gate_case.workload.timed) {
      const auto model_start = Clock::now();
      model = oracle.fp32_model(gate_case);
      outcome.reference_seconds += seconds_since(model_start);
    }
    start = Clock::now();
    release.mapping = MappedFile(request.output_path, MappedFile::Mode::read);
    const MappedFile& got = release.mapping;
    GateOutcome case_errors;
    for (int call = 0; call < run.calls_completed; ++call) {
      for (const OutputLayout& output : output_layout(task.signature, gate_case.workload)) {
        const TensorSpec& spec = task.signature.tensors[output.tensor];
        const ToleranceSpec bound =
            tolerance_for(task.tolerance, spec.dtype, gate_case.workload.name);
        const OutputComparison comparison = compare_output(
            spec.dtype, got.bytes(call * run.output_bytes + output.offset, output.bytes),
            expected.file.bytes(output.offset, output.bytes), output.shape, bound);
        case_errors.max_abs_error = std::max(case_errors.max_abs_error, comparison.max_abs_error);
        case_errors.max_rel_error = std::max(case_errors.max_rel_error, comparison.max_rel_error);
        case_errors.max_normalized_error =
            std::max(case_errors.max_normalized_error, comparison.normalized_error);
        std::optional<PrecisionCheck> precision;
        if (model != nullptr && spec.dtype == DType::f32) {
          precision = check_precision(
              got.bytes(call * run.output_bytes + output.offset, output.bytes),
              expected.file.bytes(output.offset, output.bytes),
              model->file.bytes(output.offset, output.bytes),
              worker::element_count(output.shape), task.precision_max_ratio);
        }
        // An fp32 output whose failing elements are each within the precision rule's ratio of
        // the fp32 model's own error there is as accurate as fp32 allows (a cancelling sum on
        // the adversarial inputs), when the norm-wise bound and the RMS rule hold. On the gate's
        // own heavy-tailed cases the aggregate judgement is the whole one
        // (heavy_tailed_output_passes says why).
        if (gate_case.adversarial &&
            heavy_tailed_output_passes(comparison, precision ? &*precision : nullptr)) {
          continue;
        }
        if (element_only_miss(comparison) && precision && precision->passed && precision->applied &&
            first_beyond_fp32_error(got.bytes(call * run.output_bytes + output.offset,
                                              output.bytes),
                                    expected.file.bytes(output.offset, output.bytes),
                                    model->file.bytes(output.offset, output.bytes),
                                    worker::element_count(output.shape), bound.rtol, bound.atol,
                                    task.precision_max_ratio, precision->model_rms_error) < 0) {
          continue;
        }
        if (comparison.passed && (!precision || precision->passed)) continue;
        outcome.compare_seconds += seconds_since(start);
        const std::string call_label =
            run.calls_completed > 1 ? ", call " + std::to_string(call + 1) : "";
        std::string message = where + call_label + ": output '" + spec.name + "': ";
        if (comparison.passed) {
          message += precision->failure;
        } else {
          message += comparison.failure;
          if (precision && !precision->passed) {
            message += " (its error is " + format_ratio(precision->ratio) +
                       " that of a plain fp32 computation: below fp32 precision, or wrong)";
          } else if (precision) {
            message += fmt::format(
                " (RMS error {:.3g} against the float64 reference, a plain fp32 computation's "
                "{:.3g}; norm-wise bound {})",
                precision->candidate_rms_error, precision->model_rms_error,
                comparison.norm_passed ? "held" : "failed");
          }
        }
        if (call > 0) {
          message += " (the first call on the same inputs passed: a race, or state kept "
                     "between calls)";
        }
        return fail(Verdict::wrong_answer, message);
      }
    }
    for (const uint64_t digest : run.digests) {
      outcome.verified.push_back(
          {gate_case.workload.name, gate_case.seed, gate_case.distribution, digest});
    }
    if (run.calls_completed == 2) {
      outcome.calls_bitwise_equal =
          outcome.calls_bitwise_equal &&
          bitwise_equal(got.bytes(0, run.output_bytes), got.bytes(run.output_bytes, run.output_bytes));
    }
    outcome.compare_seconds += seconds_since(start);
    outcome.max_abs_error = std::max(outcome.max_abs_error, case_errors.max_abs_error);
    outcome.max_rel_error = std::max(outcome.max_rel_error, case_errors.max_rel_error);
    outcome.max_normalized_error =
        std::max(outcome.max_normalized_error, case_errors.max_normalized_error);
    ++outcome.cases_checked;
  }
  return outcome;
}

}  // namespace kforge::evaluation

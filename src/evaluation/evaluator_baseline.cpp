// The torch.compile baseline of the evaluation plane (EvaluationPolicy::baseline = compile):
// the compile and a quick timing at prepare(), and the compiled module's turn in rung 3's rounds.

#include "common/error.h"
#include "evaluation/evaluator.h"
#include "evaluation/statistics.h"

namespace kforge::evaluation {

CompileProbe Evaluator::prepare_compile_baseline(std::vector<std::string>& warnings) {
  CompileProbe probe;
  if (policy_.baseline != BaselineKind::compile) return probe;
  if (!task_.has_torch_reference()) {
    // The CLI says so before the run; a plane built without it must not send what
    // kforge-worker refuses.
    policy_.baseline = BaselineKind::eager;
    return probe;
  }
  probe.ran = true;
  worker::TimeRequest request =
      time_request(oracle_->handle(), timed_workload_, policy_.quick, timing_seed_);
  request.baseline = to_string(BaselineKind::compile);
  const worker::TimeResult result = reference_worker_.time(request, policy_.compile_timeout_s);
  if (result.verdict == Verdict::ok) {
    probe.ok = true;
    probe.compile_ms = result.compile_ms;
    probe.median_ms = median(result.samples_ms);
    return probe;
  }
  if (result.compile_unsupported) {
    throw Error(task_.source_path + ": --baseline compile: " + result.message);
  }
  probe.message = to_string(result.verdict) + ": " + result.message;
  policy_.baseline = BaselineKind::eager;
  warnings.push_back("no torch.compile baseline (" + probe.message +
                     "); speedups are against the reference as given (eager) only");
  return probe;
}

std::optional<std::vector<double>> Evaluator::time_compiled_reference(std::string& failure) {
  worker::TimeRequest request =
      time_request(oracle_->handle(), timed_workload_, policy_.round, timing_seed_);
  request.baseline = to_string(BaselineKind::compile);
  // A worker restarted since prepare() compiles again within this request.
  worker::TimeResult result = reference_worker_.time(request, policy_.compile_timeout_s);
  if (result.verdict != Verdict::ok) {
    failure = to_string(result.verdict) + ": " + result.message;
    return std::nullopt;
  }
  return std::move(result.samples_ms);
}

}  // namespace kforge::evaluation

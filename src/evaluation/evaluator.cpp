#include "evaluation/evaluator.h"

#include "common/error.h"

namespace kforge::evaluation {

Evaluator::Evaluator(worker::Worker& worker, const Task& task, EvaluationPolicy policy)
    : worker_(worker), task_(task), policy_(policy) {
  for (const Workload& workload : task.workloads) {
    if (workload.timed) {
      timed_workload_ = workload;
      break;
    }
  }
  if (timed_workload_.name.empty()) throw Error(task.source_path + ": no timed workload");
}

worker::CheckRequest Evaluator::check_request(int candidate_handle) const {
  worker::CheckRequest request;
  request.candidate_handle = candidate_handle;
  request.reference_handle = reference_handle_;
  request.signature = task_.signature;
  request.tolerance = task_.tolerance;
  for (int i = 0; i < policy_.seeds; ++i) request.seeds.push_back(policy_.base_seed + i);
  // Gate workloads with every seed; the timed (large) ones are checked in a second request with
  // one seed, so a candidate wrong only at full size cannot pass.
  for (const Workload& workload : task_.workloads) {
    if (!workload.timed) request.workloads.push_back(workload);
  }
  return request;
}

worker::TimeRequest Evaluator::time_request(int handle, int warmup, int repetitions) const {
  worker::TimeRequest request;
  request.handle = handle;
  request.signature = task_.signature;
  request.workload = timed_workload_;
  request.seed = policy_.base_seed;
  request.warmup = warmup;
  request.repetitions = repetitions;
  request.flush_l2 = policy_.flush_l2;
  request.max_seconds = policy_.max_time_per_request_s;
  return request;
}

int Evaluator::prepare_reference(const compile::Artifact& reference) {
  if (reference.verdict != Verdict::ok) {
    throw Error("the task's reference does not compile (" + task_.source_path + "):\n" +
                reference.log);
  }
  worker::LoadResult loaded = worker_.load({reference.path}, policy_.load_timeout_s);
  if (loaded.verdict != Verdict::ok) {
    throw Error("the task's reference does not load: " + to_string(loaded.verdict) + ": " +
                loaded.message);
  }
  reference_handle_ = loaded.handle;
  CandidateEvaluation self = evaluate_loaded(loaded.handle);
  if (self.verdict != Verdict::ok) {
    throw Error("the task's reference fails against itself (" + to_string(self.verdict) +
                "): " + self.message + " - is it deterministic and does it write every output?");
  }
  return reference_handle_;
}

CandidateEvaluation Evaluator::evaluate(const compile::Artifact& artifact) {
  CandidateEvaluation result;
  if (artifact.verdict != Verdict::ok) {
    result.verdict = artifact.verdict;
    result.message = "compile error";
    return result;
  }
  worker::LoadResult loaded = worker_.load({artifact.path}, policy_.load_timeout_s);
  if (loaded.verdict != Verdict::ok) {
    result.verdict = loaded.verdict;
    result.message = loaded.message;
    return result;
  }
  return evaluate_loaded(loaded.handle);
}

CandidateEvaluation Evaluator::evaluate_loaded(int handle) {
  CandidateEvaluation result;
  result.handle = handle;
  worker::CheckRequest gate = check_request(handle);
  std::vector<worker::CheckRequest> requests;
  if (!gate.workloads.empty()) requests.push_back(gate);
  worker::CheckRequest full = gate;
  full.workloads = {timed_workload_};
  full.seeds = {policy_.base_seed + 1000};
  requests.push_back(full);
  for (const worker::CheckRequest& request : requests) {
    worker::CheckResult check = worker_.check(request, policy_.check_timeout_s);
    result.check.cases_checked += check.cases_checked;
    result.check.max_abs_error = std::max(result.check.max_abs_error, check.max_abs_error);
    result.check.max_rel_error = std::max(result.check.max_rel_error, check.max_rel_error);
    if (check.verdict != Verdict::ok) {
      result.verdict = check.verdict;
      result.message = check.message;
      result.check.verdict = check.verdict;
      result.check.message = check.message;
      return result;
    }
  }
  worker::TimeResult timing = time_quick(handle);
  if (timing.verdict != Verdict::ok) {
    result.verdict = timing.verdict;
    result.message = timing.message;
    return result;
  }
  result.samples_ms = timing.samples_ms;
  result.timing = summarize(timing.samples_ms);
  return result;
}

worker::TimeResult Evaluator::time_quick(int handle) {
  return worker_.time(time_request(handle, policy_.quick_warmup, policy_.quick_repetitions),
                      policy_.time_timeout_s);
}

Evaluator::PairedSamples Evaluator::time_paired(int reference_handle, int candidate_handle) {
  PairedSamples paired;
  for (int round = 0; round < policy_.final_rounds; ++round) {
    worker::TimeResult reference = worker_.time(
        time_request(reference_handle, policy_.final_warmup, policy_.final_repetitions),
        policy_.time_timeout_s);
    if (reference.verdict != Verdict::ok) {
      throw Error("timing the reference failed: " + to_string(reference.verdict) + ": " +
                  reference.message);
    }
    worker::TimeResult candidate = worker_.time(
        time_request(candidate_handle, policy_.final_warmup, policy_.final_repetitions),
        policy_.time_timeout_s);
    if (candidate.verdict != Verdict::ok) {
      paired.failure = to_string(candidate.verdict) + ": " + candidate.message;
      paired.candidate_ms.clear();
      return paired;
    }
    paired.reference_ms.insert(paired.reference_ms.end(), reference.samples_ms.begin(),
                               reference.samples_ms.end());
    paired.candidate_ms.insert(paired.candidate_ms.end(), candidate.samples_ms.begin(),
                               candidate.samples_ms.end());
  }
  return paired;
}

}  // namespace kforge::evaluation

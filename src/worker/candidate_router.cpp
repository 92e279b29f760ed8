#include "worker/candidate_router.h"

#include <string>

#include "common/error.h"

namespace kforge::worker {

bool is_python_candidate(std::string_view path) {
  return path.size() > 3 && path.substr(path.size() - 3) == ".py";
}

LoadResult CandidateRouter::load(const LoadRequest& request, double timeout_s) {
  const bool python = is_python_candidate(request.path);
  if (python && request.task_path.empty()) {
    LoadResult refused;
    refused.verdict = Verdict::wrong_signature;
    refused.message = request.path + " is a Python candidate, but the task has no PyTorch "
                      "reference (no derived task to run a ModelNew against)";
    return refused;
  }
  Worker& target = python ? python_ : native_;
  LoadResult result = target.load(request, timeout_s);
  if (result.verdict != Verdict::ok) return result;
  handles_.emplace_back(&target, result.handle);
  result.handle = static_cast<int>(handles_.size());
  return result;
}

std::pair<Worker*, int> CandidateRouter::resolve(int handle) const {
  if (handle < 1 || handle > static_cast<int>(handles_.size())) {
    throw Error("candidate router: unknown kernel handle " + std::to_string(handle));
  }
  return handles_[static_cast<size_t>(handle - 1)];
}

RunResult CandidateRouter::run(const RunRequest& request, double timeout_s) {
  const auto [target, handle] = resolve(request.handle);
  RunRequest sent = request;
  sent.handle = handle;
  return target->run(sent, timeout_s);
}

TimeResult CandidateRouter::time(const TimeRequest& request, double timeout_s) {
  const auto [target, handle] = resolve(request.handle);
  TimeRequest sent = request;
  sent.handle = handle;
  return target->time(sent, timeout_s);
}

void CandidateRouter::shutdown() {
  native_.shutdown();
  python_.shutdown();
}

}  // namespace kforge::worker

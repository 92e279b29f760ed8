// One candidate Worker over two processes: native kernels go to kforge-worker, Python candidates
// (a KernelBench-format ModelNew source, `*.py`) to the Python candidate worker (`python3 -m
// kforge_torch candidate-worker`, docs/torch_tasks.md "Python candidates"). The search and the
// Evaluator keep talking to one worker per device; the router picks the process at load and
// keeps its own handle numbers, each standing for (process, that process's handle).
//
// Both processes stay apart from the reference worker: expected outputs never enter either.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "worker/worker.h"

namespace kforge::worker {

/// True when `path` names a Python candidate: it ends in ".py".
bool is_python_candidate(std::string_view path);

class CandidateRouter final : public Worker {
 public:
  /// `native` runs shared objects (kforge-worker), `python` Python candidates; neither is owned,
  /// both must outlive the router. The python worker is started only when the first Python
  /// candidate is loaded (its device_info is never asked for before).
  CandidateRouter(Worker& native, Worker& python) : native_(native), python_(python) {}

  /// The native worker's: the device both processes run on.
  DeviceInfo device_info() override { return native_.device_info(); }
  /// Routes by request.path (is_python_candidate). A Python candidate without a task_path is
  /// refused with wrong_signature, naming what is missing: it cannot be run against nothing.
  LoadResult load(const LoadRequest& request, double timeout_s) override;
  RunResult run(const RunRequest& request, double timeout_s) override;
  TimeResult time(const TimeRequest& request, double timeout_s) override;
  void shutdown() override;

 private:
  /// The process and its own handle behind router handle `handle`; throws Error for one this
  /// router never gave out.
  std::pair<Worker*, int> resolve(int handle) const;

  Worker& native_;
  Worker& python_;
  std::vector<std::pair<Worker*, int>> handles_;  // router handle h -> handles_[h - 1]
};

}  // namespace kforge::worker

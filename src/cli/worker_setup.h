// How kforge's commands start their workers: kforge-worker for candidates, and the reference
// worker (kforge-worker, or the torch reference worker for a PyTorch problem) on the same
// device. Shared by `kforge optimize` and `kforge task --check`, so both run the reference the
// same way.
#pragma once

#include <string>

#include "core/task.h"
#include "worker/worker_client.h"

namespace kforge::cli {

/// The two worker configurations of a run on `backend`, device `device`.
struct WorkerConfigs {
  /// kforge-worker (candidates; also the profiler's), sandboxed as detect_sandbox() finds.
  worker::ProcessWorkerConfig candidate;
  /// The reference worker: `candidate` with measure_device set (its DeviceInfo gives the
  /// plausibility floor), or, for a task with a PyTorch reference, kforge's Python worker
  /// (torch_worker_command) in the scrubbed environment plus what PyTorch needs
  /// (torch_environment). No restart or slow-answer callbacks: the caller adds its own.
  worker::ProcessWorkerConfig reference;
  /// For a task with a PyTorch reference: the Python candidate worker that runs ModelNew
  /// candidates (worker/candidate_router.h), on `device`, in the scrubbed environment plus what
  /// PyTorch needs; empty worker_path otherwise.
  worker::ProcessWorkerConfig python_candidate;
};

/// Builds both configurations. Throws Error when the worker binary cannot be found.
WorkerConfigs worker_configs(const Task& task, const std::string& backend, int device);

}  // namespace kforge::cli

// The seam between the evaluation code and a worker process.
//
// `Worker` is what the gate and the search talk to; `ProcessWorker` (worker_client.h) is the real
// one, a spawned `kforge-worker` process; tests hand in fakes. Every call is bounded by a
// timeout. A worker that crashes, hangs or answers garbage is killed (its whole process group)
// and respawned on the next call; the call returns the verdict `worker_crashed` or `timeout`
// instead of throwing, so a bad candidate never stops a run.
#pragma once

#include "worker/protocol.h"

namespace kforge::worker {

class Worker {
 public:
  virtual ~Worker() = default;
  /// Device description from the worker's hello (starts the worker if needed).
  /// Throws Error if the worker cannot be started at all (missing binary, no device).
  virtual DeviceInfo device_info() = 0;
  virtual LoadResult load(const LoadRequest& request, double timeout_s) = 0;
  /// Runs a kernel and leaves its outputs in request.output_path (protocol.h, RunRequest).
  virtual RunResult run(const RunRequest& request, double timeout_s) = 0;
  virtual TimeResult time(const TimeRequest& request, double timeout_s) = 0;
  /// Writes provided inputs (protocol.h, ProvideRequest): only a PyTorch task's reference
  /// worker can. The default answers runtime_error, as kforge-worker does.
  virtual ProvideResult provide(const ProvideRequest& /*request*/, double /*timeout_s*/) {
    ProvideResult refused;
    refused.verdict = Verdict::runtime_error;
    refused.message = "this worker cannot write provided inputs (only the reference worker of a "
                      "PyTorch task runs the problem's get_inputs())";
    return refused;
  }
  /// Asks the worker to exit and reaps it; idempotent.
  virtual void shutdown() = 0;
};

}  // namespace kforge::worker

// A Worker that repeats a call once, in a fresh worker process, when the process died during it.
#pragma once

#include <functional>
#include <string>

#include "worker/worker.h"

namespace kforge::worker {

/// Forwards every call to `inner`; a load, run or time that comes back `worker_crashed` (the
/// process died: killed from outside, out of memory) is made once more, in the worker the next
/// call respawns (ProcessWorker reloads its kernels there). For the reference's worker: the
/// reference is trusted and already checked against itself, so its process dying is taken for an
/// accident, not a verdict on the kernel; a second crash is returned as is. Timeouts are not
/// repeated (a hanging reference would double the wait). `on_retry` hears each repeat with the
/// first crash's message.
class CrashRetry : public Worker {
 public:
  explicit CrashRetry(Worker& inner, std::function<void(const std::string&)> on_retry = {})
      : inner_(inner), on_retry_(std::move(on_retry)) {}

  DeviceInfo device_info() override { return inner_.device_info(); }
  LoadResult load(const LoadRequest& request, double timeout_s) override;
  RunResult run(const RunRequest& request, double timeout_s) override;
  TimeResult time(const TimeRequest& request, double timeout_s) override;
  ProvideResult provide(const ProvideRequest& request, double timeout_s) override;
  void shutdown() override { inner_.shutdown(); }

  /// Calls repeated so far.
  int retries() const { return retries_; }

 private:
  template <typename Result, typename Call>
  Result once_more_on_crash(Call call);

  Worker& inner_;
  std::function<void(const std::string&)> on_retry_;
  int retries_ = 0;
};

}  // namespace kforge::worker

#include "worker/crash_retry.h"

namespace kforge::worker {

template <typename Result, typename Call>
Result CrashRetry::once_more_on_crash(Call call) {
  Result result = call();
  if (result.verdict != Verdict::worker_crashed) return result;
  ++retries_;
  if (on_retry_) on_retry_(result.message);
  return call();
}

LoadResult CrashRetry::load(const LoadRequest& request, double timeout_s) {
  return once_more_on_crash<LoadResult>([&] { return inner_.load(request, timeout_s); });
}

RunResult CrashRetry::run(const RunRequest& request, double timeout_s) {
  return once_more_on_crash<RunResult>([&] { return inner_.run(request, timeout_s); });
}

ProvideResult CrashRetry::provide(const ProvideRequest& request, double timeout_s) {
  return once_more_on_crash<ProvideResult>([&] { return inner_.provide(request, timeout_s); });
}

TimeResult CrashRetry::time(const TimeRequest& request, double timeout_s) {
  return once_more_on_crash<TimeResult>([&] { return inner_.time(request, timeout_s); });
}

}  // namespace kforge::worker

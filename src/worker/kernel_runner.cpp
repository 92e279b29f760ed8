#include "worker/kernel_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "common/mapped_file.h"
#include "worker/host_data.h"
#include "worker/tensor_set.h"

namespace kforge::worker {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
/// Calls the entry point; returns what went wrong ("" if it returned 0). Does not synchronize.
std::string invoke(KernelEntry kernel, const kforge_args& args) {
  try {
    const int code = kernel(&args);
    return code == 0 ? "" : "kforge_run returned " + std::to_string(code);
  } catch (const std::exception& e) {
    return std::string("kforge_run threw an exception: ") + e.what();
  } catch (...) {
    return "kforge_run threw an exception";
  }
}

/// Calls the entry point and waits for the whole device; returns what went wrong ("" if nothing).
std::string call_and_wait(DeviceBackend& backend, KernelEntry kernel, const kforge_args& args) {
  std::string failure = invoke(kernel, args);
  try {
    backend.synchronize();
  } catch (const DeviceError& e) {
    return failure.empty() ? e.what() : failure + "; " + e.what();
  }
  return failure;
}

/// One window of the backend's work audit around a call (DeviceBackend::begin_work_audit).
/// finish() closes it and returns the finding; a window left open by an early return (a failed
/// call, whose verdict is already decided) is closed by the destructor, its finding dropped.
class AuditWindow {
 public:
  explicit AuditWindow(DeviceBackend& backend)
      : backend_(backend), audited_(backend.begin_work_audit()), open_(audited_) {}
  ~AuditWindow() {
    if (!open_) return;
    try {
      backend_.end_work_audit();
    } catch (const std::exception&) {  // a lost device: the failed call's verdict stands
    }
  }
  AuditWindow(const AuditWindow&) = delete;
  AuditWindow& operator=(const AuditWindow&) = delete;

  bool audited() const { return audited_; }
  /// "" or the work the call put outside the backend's stream. Throws Error as end_work_audit.
  std::string finish() {
    if (!open_) return "";
    open_ = false;
    return backend_.end_work_audit();
  }

 private:
  DeviceBackend& backend_;
  bool audited_;
  bool open_;
};

/// Storage element `element` of tensor `tensor`, for a message: "'name' at [i, j]".
std::string describe_element(const TensorSet& set, const Signature& signature, size_t tensor,
                             int64_t element) {
  const std::string name = "'" + signature.tensors[tensor].name + "'";
  if (!set.compact(tensor)) {
    return name + " at storage element " + std::to_string(element) + " of its padded layout";
  }
  return name + " at " + format_index(element, set.shape(tensor));
}

/// Where `before` and `after` first differ, as "'name' at [i, j]", or "" if identical.
std::string first_difference(const TensorSet& set, const Signature& signature, size_t tensor,
                             const std::byte* before, const std::byte* after) {
  if (std::memcmp(before, after, static_cast<size_t>(set.bytes(tensor))) == 0) return "";
  const int element_bytes = dtype_size(signature.tensors[tensor].dtype);
  const int64_t elements = set.bytes(tensor) / element_bytes;
  for (int64_t e = 0; e < elements; ++e) {
    if (!std::equal(before + e * element_bytes, before + (e + 1) * element_bytes,
                    after + e * element_bytes)) {
      return describe_element(set, signature, tensor, e);
    }
  }
  return "";
}

/// Device-side hashes of every output, or nullopt when the backend cannot hash.
std::optional<std::vector<uint64_t>> output_hashes(DeviceBackend& backend, const TensorSet& set) {
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < set.size(); ++i) {
    if (set.is_input(i)) continue;
    const auto hash = backend.content_hash(set.data(i), set.bytes(i));
    if (!hash) return std::nullopt;
    hashes.push_back(*hash);
  }
  return hashes;
}

void validate(const Signature& signature, const Workload& workload) {
  for (const TensorSpec& spec : signature.tensors) bind_shape(spec, workload);
}

}  // namespace

RunResult run_outputs(DeviceBackend& backend, KernelEntry kernel, const RunRequest& request) {
  if (request.calls < 1 || request.calls > 2) throw Error("run request needs calls = 1 or 2");
  if (request.output_path.empty()) throw Error("run request needs an output_path");
  validate(request.signature, request.workload);
  const InputDistribution distribution = parse_input_distribution(request.distribution);
  RunResult result;
  auto start = Clock::now();
  TensorSet set(backend, request.signature, request.workload, request.padded);
  set.remap_inputs(parse_input_remap(request.remap));
  set.provide_from(request.provided_dir);
  const FilledInputs inputs = set.fill_inputs(request.seed, distribution, !request.host_inputs);
  backend.synchronize();
  result.input_ms = ms_since(start);
  result.output_bytes = set.output_bytes();
  MappedFile file(request.output_path, MappedFile::Mode::write,
                  result.output_bytes * request.calls);
  const auto fail = [&result](const std::string& message) {
    result.verdict = Verdict::runtime_error;
    result.message = message;
    return result;
  };
  const bool check_late_writes = request.late_write_wait_ms > 0 && result.output_bytes > 0;
  try {
    std::optional<std::vector<uint64_t>> hashes_after_call;
    for (int call = 0; call < request.calls; ++call) {
      set.poison_outputs();
      backend.synchronize();
      // Opened with the device idle and closed after call_and_wait's device-wide synchronize,
      // so that it holds the call's work and nothing of kforge's but on the worker's stream.
      AuditWindow audit(backend);
      const auto call_start = Clock::now();
      if (std::string failure = call_and_wait(backend, kernel, set.args()); !failure.empty()) {
        return fail(request.calls > 1 ? "call " + std::to_string(call + 1) + ": " + failure
                                      : failure);
      }
      result.call_ms.push_back(ms_since(call_start));
      const std::string foreign = audit.finish();
      // After the audit window: the device hash is kforge's work, not the call's.
      const uint64_t digest = request.digest ? output_digest(backend, set) : 0;
      if (!foreign.empty() && result.foreign_work.empty()) {
        result.foreign_work =
            request.calls > 1 ? "call " + std::to_string(call + 1) + ": " + foreign : foreign;
      }
      result.work_audited = audit.audited() && (call == 0 || result.work_audited);
      if (check_late_writes && call + 1 == request.calls) {
        // Taken before the read-back, so that a write during the read-back shows as well.
        const auto check_start = Clock::now();
        hashes_after_call = output_hashes(backend, set);
        result.check_ms += ms_since(check_start);
      }
      const auto output_start = Clock::now();
      set.download_outputs(file.data() + result.output_bytes * call);
      result.output_ms += ms_since(output_start);
      // Reported only when the outputs did not change while they were read back: the digest must
      // be that of the bytes the orchestrator compares.
      if (request.digest && output_digest(backend, set) == digest) result.digests.push_back(digest);
      ++result.calls_completed;
    }
    const auto check_start = Clock::now();
    const std::byte* last = file.data() + result.output_bytes * (request.calls - 1);
    if (check_late_writes) {
      // Work that goes on after kforge_run returned and the device went idle (a detached thread)
      // changes the outputs after they were read. On cuda the outputs are hashed on the device
      // before the read-back and after the wait, and read back again only when the hashes differ.
      std::this_thread::sleep_for(
          std::chrono::duration<double, std::milli>(request.late_write_wait_ms));
      if (!hashes_after_call || output_hashes(backend, set) != hashes_after_call) {
        std::vector<std::byte> again(static_cast<size_t>(result.output_bytes));
        set.download_outputs(again.data());
        int64_t offset = 0;
        for (size_t i = 0; i < set.size() && result.late_write.empty(); ++i) {
          if (set.is_input(i)) continue;
          result.late_write =
              first_difference(set, request.signature, i, last + offset, again.data() + offset);
          offset += set.bytes(i);
        }
        if (result.late_write.empty() && hashes_after_call) {
          result.late_write = "an output (changed during the read-back)";
        }
      }
    }
    for (size_t i = 0; i < set.size() && result.input_modified.empty(); ++i) {
      if (!set.is_input(i)) continue;
      if (const int64_t changed = set.input_change(i, inputs); changed >= 0) {
        result.input_modified = describe_element(set, request.signature, i, changed);
      }
    }
    // The bands are filled once per set, so this one look covers every call and the late-write
    // wait.
    result.guard_violation = set.guard_violation();
    result.check_ms += ms_since(check_start);
  } catch (const DeviceError& e) {  // an asynchronous fault surfacing on a read-back
    return fail(e.what());
  }
  return result;
}

double median_relative_half_width(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  if (n < 5) return std::numeric_limits<double>::infinity();
  const double spread = 1.96 * std::sqrt(static_cast<double>(n)) / 2.0;
  const auto low = static_cast<size_t>(std::max(0.0, std::floor(n / 2.0 - spread)));
  const auto high = std::min(n - 1, static_cast<size_t>(std::ceil(n / 2.0 + spread)));
  const double median =
      n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  return 0.5 * (sorted[high] - sorted[low]) / median;
}

namespace {

/// The (seed, distribution) a checked call's inputs were made from.
struct SetInputs {
  uint64_t seed = 0;
  std::string distribution;
};

/// The checked calls of one timing request: which calls, on which inputs, and what this request
/// already reported (a repeated digest is not written twice).
class CallChecker {
 public:
  CallChecker(DeviceBackend& backend, const TimeRequest& request, TimeResult& result)
      : backend_(backend), request_(request), result_(result) {
    for (const TimedCheck& check : request.checks) {
      if (check.call < 0 || check.call >= request.policy.min_repetitions) {
        throw Error("time request: check call " + std::to_string(check.call) +
                    " must be in [0, min_repetitions), so that it runs");
      }
      parse_input_distribution(check.distribution);  // throws for an unknown name
    }
    if (!request.checks.empty() && request.check_path.empty()) {
      throw Error("time request with checks needs a check_path");
    }
  }

  /// The check of timed call `call`, or nullptr.
  const TimedCheck* at(int call) const {
    for (const TimedCheck& check : request_.checks) {
      if (check.call == call) return &check;
    }
    return nullptr;
  }

  /// The inputs checked call `check` runs on: the check's own when it overwrites, else those of
  /// set `set_index` (seed + set_index, the request's distribution).
  SetInputs inputs_of(const TimedCheck& check, size_t set_index) const {
    if (check.overwrite) return {check.seed, check.distribution};
    return {request_.seed + set_index, request_.distribution};
  }

  /// Before an overwriting checked call: the check's inputs over the set's.
  void prepare(const TimedCheck& check, TensorSet& set) {
    if (check.overwrite) {
      set.fill_inputs(check.seed, parse_input_distribution(check.distribution));
    }
  }

  /// After an overwriting checked call was recorded: the set's own inputs again, so that a later
  /// check on the set's own values (in this request or the next, through the cache) runs on
  /// values no check wrote there.
  void restore(const TimedCheck& check, TensorSet& set, size_t set_index) {
    if (check.overwrite) {
      set.fill_inputs(request_.seed + set_index, parse_input_distribution(request_.distribution));
    }
  }

  /// After a checked call returned and the device is idle: hashes the outputs and writes them
  /// unless their digest is verified or already written in this request for the same inputs.
  void record(int call, TensorSet& set, const SetInputs& inputs) {
    const auto start = Clock::now();
    CheckedCall checked{call, inputs.seed, inputs.distribution, output_digest(backend_, set)};
    for (const CheckedCall& earlier : result_.checked) {
      if (earlier.seed == inputs.seed && earlier.distribution == inputs.distribution &&
          earlier.digest == checked.digest) {
        checked.same_as = earlier.same_as >= 0 ? earlier.same_as : earlier.call;
      }
    }
    const bool verified = std::any_of(
        request_.verified.begin(), request_.verified.end(), [&](const VerifiedDigest& known) {
          return known.seed == inputs.seed && known.distribution == inputs.distribution &&
                 known.digest == checked.digest;
        });
    if (!verified && checked.same_as < 0) {
      // A file per checked call, sized for one call's outputs: nothing is reserved (on tmpfs,
      // gigabytes zeroed) for the checks whose outputs need no writing.
      checked.offset = 0;
      MappedFile file(check_file(request_.check_path, result_.checked.size()),
                      MappedFile::Mode::write, set.output_bytes());
      set.download_outputs(file.data());
    }
    result_.checked.push_back(std::move(checked));
    result_.check_ms += ms_since(start);
  }

 private:
  DeviceBackend& backend_;
  const TimeRequest& request_;
  TimeResult& result_;
};

}  // namespace

std::string check_file(const std::string& check_path, size_t check) {
  return check_path + "." + std::to_string(check);
}

uint64_t output_digest(DeviceBackend& backend, const TensorSet& set) {
  // FNV-1a over the per-output hashes (or over the bytes where the backend cannot hash).
  uint64_t digest = 0xcbf29ce484222325ULL;
  const auto mix = [&digest](const std::byte* data, size_t count) {
    for (size_t k = 0; k < count; ++k) {
      digest = (digest ^ static_cast<uint64_t>(data[k])) * 0x100000001b3ULL;
    }
  };
  for (size_t i = 0; i < set.size(); ++i) {
    if (set.is_input(i)) continue;
    if (const auto hash = backend.content_hash(set.data(i), set.bytes(i))) {
      mix(reinterpret_cast<const std::byte*>(&*hash), sizeof *hash);
      continue;
    }
    backend.read_back(set.data(i), set.bytes(i),
                      [&mix](const std::byte* data, int64_t, int64_t count) {
                        mix(data, static_cast<size_t>(count));
                      });
  }
  return digest;
}

TimeResult run_time(DeviceBackend& backend, KernelEntry kernel, const TimeRequest& request,
                    TimingCache* cache) {
  const MeasurementPolicy& policy = request.policy;
  if (policy.min_repetitions < 1 || policy.max_repetitions < policy.min_repetitions ||
      policy.warmup < 0 || !(policy.max_seconds > 0) || request.input_sets < 1) {
    throw Error(
        "time request needs 1 <= min_repetitions <= max_repetitions, warmup >= 0, "
        "max_seconds > 0 and input_sets >= 1");
  }
  validate(request.signature, request.workload);
  const InputDistribution distribution = parse_input_distribution(request.distribution);
  const auto start = Clock::now();
  TimeResult result;
  CallChecker checker(backend, request, result);
  const auto fail = [&result](const std::string& message) {
    result.verdict = Verdict::runtime_error;
    result.message = message;
    result.samples_ms.clear();
    result.host_ms.clear();
    return result;
  };

  // Input sets at distinct addresses with distinct values, as many as memory holds (>= 1);
  // those of the previous request when it had the same key, with the inputs checks wrote there.
  nlohmann::json key_json = {{"kernel", reinterpret_cast<uintptr_t>(kernel)},
                             {"signature", request.signature},
                             {"workload", request.workload},
                             {"seed", request.seed},
                             {"distribution", request.distribution},
                             {"input_sets", request.input_sets},
                             {"provided_dir", request.provided_dir}};
  const std::string key = key_json.dump();
  std::vector<TensorSet> sets;
  if (cache != nullptr && cache->key == key && !cache->sets.empty()) {
    sets = std::move(cache->sets);
    result.inputs_reused = true;
  }
  if (cache != nullptr) {
    cache->key.clear();
    cache->sets.clear();  // frees the device memory of another key before allocating
  }
  if (sets.empty()) {
    sets.emplace_back(backend, request.signature, request.workload);
    int64_t set_bytes = 0;
    for (size_t i = 0; i < sets[0].size(); ++i) set_bytes += sets[0].bytes(i);
    while (static_cast<int>(sets.size()) < request.input_sets &&
           set_bytes * 2 < backend.free_memory_bytes()) {
      sets.emplace_back(backend, request.signature, request.workload);
    }
    for (size_t s = 0; s < sets.size(); ++s) {
      sets[s].provide_from(request.provided_dir);
      sets[s].fill_inputs(request.seed + s, distribution);
    }
  }
  result.input_sets_used = static_cast<int>(sets.size());
  backend.synchronize();
  result.setup_ms = ms_since(start);

  try {
    // The cost of the timing bracket itself: host minus device time with nothing inside.
    std::vector<double> overhead;
    for (int i = 0; i < 5; ++i) {
      const auto host_start = Clock::now();
      backend.start_timer();
      const double device_ms = backend.stop_timer_ms();
      backend.synchronize();
      overhead.push_back(ms_since(host_start) - device_ms);
    }
    std::sort(overhead.begin(), overhead.end());
    result.overhead_ms = overhead[overhead.size() / 2];

    // Every set is warmed up at least once, so that no timed call is the first on its set: a
    // first call pays for first touches, and a kernel that computes only on inputs it has not
    // seen at an address would otherwise be honest exactly there.
    const int warmup = std::max(policy.warmup, static_cast<int>(sets.size()));
    for (int i = 0; i < warmup && ms_since(start) < policy.max_seconds * 1000.0; ++i) {
      TensorSet& set = sets[static_cast<size_t>(i) % sets.size()];
      set.poison_outputs();  // as before a timed call: warm-up and timed calls look alike
      backend.synchronize();
      const auto call_start = Clock::now();
      if (std::string failure = call_and_wait(backend, kernel, set.args()); !failure.empty()) {
        return fail("warm-up call " + std::to_string(i) + ": " + failure);
      }
      result.warmup_ms.push_back(ms_since(call_start));
    }
    const auto timed_start = Clock::now();
    std::vector<double> sorted;
    for (int i = 0; i < policy.max_repetitions; ++i) {
      const size_t set_index = static_cast<size_t>(i) % sets.size();
      TensorSet& set = sets[set_index];
      const TimedCheck* check = checker.at(i);
      if (check != nullptr) checker.prepare(*check, set);
      // Poisoned before every call, outside the timed region: a call that skips its work leaves
      // NaN, not the right answer of the last call on this set.
      set.poison_outputs();
      const kforge_args& args = set.args();
      if (request.flush_l2) backend.reset_persisting_l2();
      backend.synchronize();  // the device is idle: nothing earlier is in the host time
      // Checked calls also run inside the work audit: they are indistinguishable from the other
      // timed calls, so work a kernel puts on another stream shows at one of them, while the
      // samples of the unchecked calls stay free of the audit's activity recording.
      std::optional<AuditWindow> audit;
      if (check != nullptr) audit.emplace(backend);
      const auto host_start = Clock::now();
      // The flush is queued, not waited for: the kernel is launched while it runs, so its
      // launch latency overlaps the flush instead of being timed (nvbench hides it with a
      // blocking kernel). The flush's own time is taken out of the host time below.
      if (request.flush_l2) backend.flush_l2();
      backend.start_timer();
      std::string failure = invoke(kernel, args);
      const double sample_ms = backend.stop_timer_ms();
      backend.synchronize();
      const double host_ms =
          ms_since(host_start) - (request.flush_l2 ? backend.last_flush_ms() : 0.0);
      if (!failure.empty()) return fail("timed call " + std::to_string(i) + ": " + failure);
      if (check != nullptr) {
        if (audit && audit->audited()) {
          const std::string foreign = audit->finish();
          if (!foreign.empty() && result.foreign_work.empty()) {
            result.foreign_work = "timed call " + std::to_string(i) + ": " + foreign;
          }
          result.work_audited = true;
        }
        if (result.guard_violation.empty()) result.guard_violation = set.guard_violation();
        checker.record(i, set, checker.inputs_of(*check, set_index));
        checker.restore(*check, set, set_index);
      }
      if (auto clock = backend.read_clock()) {
        result.sm_clock_mhz.push_back(clock->sm_clock_mhz);
        result.throttled.push_back(clock->throttled);
      }
      result.samples_ms.push_back(sample_ms);
      result.host_ms.push_back(host_ms);
      sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), sample_ms), sample_ms);
      if (i + 1 >= policy.min_repetitions &&
          median_relative_half_width(sorted) <= policy.target_relative_noise) {
        result.stop_reason = "noise";
        break;
      }
      // The time limit cuts samples short only before the last one asked for: a request whose
      // every call ran stopped at max_repetitions, however long it took.
      if (ms_since(start) >= policy.max_seconds * 1000.0 && i + 1 >= policy.min_repetitions &&
          i + 1 < policy.max_repetitions) {
        result.stop_reason = "max_seconds";
        break;
      }
    }
    if (result.stop_reason.empty()) result.stop_reason = "max_repetitions";
    result.host_wall_ms = ms_since(timed_start);
    // Sets whose guard bands were written are not kept: their bands would report it again.
    if (cache != nullptr && result.guard_violation.empty()) {
      cache->key = key;
      cache->sets = std::move(sets);
    }
  } catch (const DeviceError& e) {
    return fail(e.what());
  }
  return result;
}

}  // namespace kforge::worker

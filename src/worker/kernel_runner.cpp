#include "worker/kernel_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "worker/compare.h"
#include "worker/host_data.h"

namespace kforge::worker {
namespace {

using Clock = std::chrono::steady_clock;
using HostTensors = std::vector<std::vector<std::byte>>;

/// Device buffers for every tensor of a signature under one workload, and the argument block a
/// kernel receives. The DLTensor views are rebuilt before every call, so a kernel that scribbles
/// on its argument block (shapes, pointers) cannot change what the harness reads back.
class TensorSet {
 public:
  TensorSet(DeviceBackend& backend, const Signature& signature, const Workload& workload)
      : backend_(backend), signature_(signature) {
    for (const TensorSpec& spec : signature.tensors) {
      shapes_.push_back(bind_shape(spec, workload));
      buffers_.emplace_back(backend, element_count(shapes_.back()) * dtype_size(spec.dtype));
    }
    for (const ScalarSpec& scalar : signature.scalars) scalars_.push_back(scalar.value);
  }

  /// Arguments for one call; valid until the next call of args().
  const kforge_args& args() {
    call_shapes_ = shapes_;
    inputs_.clear();
    outputs_.clear();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      DLTensor tensor{};
      tensor.data = buffers_[i].data();
      tensor.device = backend_.dl_device();
      tensor.ndim = static_cast<int32_t>(call_shapes_[i].size());
      tensor.dtype = to_dl_dtype(signature_.tensors[i].dtype);
      tensor.shape = call_shapes_[i].data();
      tensor.strides = nullptr;  // compact row-major
      tensor.byte_offset = 0;
      (is_input(i) ? inputs_ : outputs_).push_back(tensor);
    }
    call_scalars_ = scalars_;
    args_ = kforge_args{KFORGE_ABI_VERSION,   static_cast<int32_t>(inputs_.size()),
                        inputs_.data(),       static_cast<int32_t>(outputs_.size()),
                        outputs_.data(),      static_cast<int32_t>(call_scalars_.size()),
                        call_scalars_.data(), backend_.stream()};
    return args_;
  }

  bool is_input(size_t i) const { return signature_.tensors[i].role == TensorRole::input; }
  size_t size() const { return buffers_.size(); }
  const std::vector<int64_t>& shape(size_t i) const { return shapes_[i]; }

  /// Inputs of the signature from `seed`, indexed like signature.tensors (outputs left empty).
  HostTensors make_inputs(uint64_t seed) const {
    HostTensors host(size());
    for (size_t i = 0; i < size(); ++i) {
      if (!is_input(i)) continue;
      host[i] = make_input(signature_.tensors[i].dtype, element_count(shapes_[i]), seed,
                           static_cast<int>(i));
    }
    return host;
  }

  void upload_inputs(const HostTensors& host) {
    for (size_t i = 0; i < size(); ++i) {
      if (is_input(i))
        backend_.copy_to_device(buffers_[i].data(), host[i].data(), buffers_[i].bytes());
    }
  }

  /// 0xFF bytes: NaN for f16/bf16/f32/f64, so an unwritten element fails the comparison.
  void poison_outputs() {
    for (size_t i = 0; i < size(); ++i) {
      if (!is_input(i)) backend_.fill_bytes(buffers_[i].data(), 0xFF, buffers_[i].bytes());
    }
  }

  std::vector<std::byte> download(size_t i) const {
    std::vector<std::byte> host(static_cast<size_t>(buffers_[i].bytes()));
    backend_.copy_to_host(host.data(), buffers_[i].data(), buffers_[i].bytes());
    return host;
  }

 private:
  DeviceBackend& backend_;
  const Signature& signature_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<double> scalars_;
  std::vector<std::vector<int64_t>> call_shapes_;
  std::vector<DLTensor> inputs_;
  std::vector<DLTensor> outputs_;
  std::vector<double> call_scalars_;
  kforge_args args_{};
};

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

/// Calls the entry point and waits for the device; returns what went wrong ("" if nothing).
std::string call_and_wait(DeviceBackend& backend, KernelEntry kernel, const kforge_args& args) {
  std::string failure = invoke(kernel, args);
  try {
    backend.synchronize();
  } catch (const DeviceError& e) {
    return failure.empty() ? e.what() : failure + "; " + e.what();
  }
  return failure;
}

std::string tensor_name(const Signature& signature, size_t i) {
  return "'" + signature.tensors[i].name + "'";
}

/// Compares the candidate's outputs and inputs of one case. Returns "" or the failure message.
std::string verify_case(TensorSet& reference, TensorSet& candidate, const HostTensors& inputs,
                        const CheckRequest& request, CheckResult* result) {
  const Signature& signature = request.signature;
  for (size_t i = 0; i < candidate.size(); ++i) {
    if (!candidate.is_input(i)) continue;
    const int element_bytes = dtype_size(signature.tensors[i].dtype);
    if (auto changed = first_changed_element(inputs[i], candidate.download(i), element_bytes)) {
      return "input " + tensor_name(signature, i) + " was modified at " +
             format_index(*changed, candidate.shape(i)) + " (kernels must not write their inputs)";
    }
  }
  std::string failure;
  for (size_t i = 0; i < candidate.size(); ++i) {
    if (candidate.is_input(i)) continue;
    const DType dtype = signature.tensors[i].dtype;
    const std::vector<std::byte> got = candidate.download(i);
    const std::vector<std::byte> expected = reference.download(i);
    // NaN policy (first version): inputs are finite, so a reference output must be too; a NaN
    // there is an element the reference never wrote (it was poisoned) or a broken reference,
    // and it would let a candidate that skips the same elements pass.
    const int64_t count = element_count(reference.shape(i));
    for (int64_t e = 0; e < count; ++e) {
      if (std::isnan(element_as_double(dtype, expected.data(), e))) {
        throw Error("the reference left NaN in output " + tensor_name(signature, i) + " at " +
                    format_index(e, reference.shape(i)) +
                    ": it must write every output element");
      }
    }
    const Comparison comparison = compare_elements(
        dtype, got, expected, element_count(candidate.shape(i)), request.tolerance);
    result->max_abs_error = std::max(result->max_abs_error, comparison.max_abs_error);
    result->max_rel_error = std::max(result->max_rel_error, comparison.max_rel_error);
    if (comparison.passed || !failure.empty()) continue;
    const double allowed =
        request.tolerance.atol + request.tolerance.rtol * std::fabs(comparison.expected);
    failure = "output " + tensor_name(signature, i) + " at " +
              format_index(comparison.first_failure, candidate.shape(i)) + ": got " +
              format_value(comparison.got) + ", expected " + format_value(comparison.expected) +
              " (allowed |difference| " + format_value(allowed) + ")";
    if (std::isnan(comparison.got) && !std::isnan(comparison.expected)) {
      failure +=
          "; NaN means the element was never written (outputs are poisoned with NaN) "
          "or the computation produced NaN";
    }
  }
  return failure;
}

/// One workload x seed. Returns false (with the verdict set in `result`) if the candidate failed.
bool check_case(DeviceBackend& backend, KernelEntry candidate, KernelEntry reference,
                const CheckRequest& request, const Workload& workload, uint64_t seed,
                CheckResult* result) {
  const std::string where = "workload '" + workload.name + "', seed " + std::to_string(seed);
  TensorSet reference_set(backend, request.signature, workload);
  TensorSet candidate_set(backend, request.signature, workload);
  const HostTensors inputs = reference_set.make_inputs(seed);
  for (TensorSet* set : {&reference_set, &candidate_set}) {
    set->upload_inputs(inputs);
    set->poison_outputs();
  }
  backend.synchronize();
  if (std::string failure = call_and_wait(backend, reference, reference_set.args());
      !failure.empty()) {
    throw Error("the reference kernel failed (" + where + "): " + failure);
  }
  std::string failure = call_and_wait(backend, candidate, candidate_set.args());
  Verdict verdict = Verdict::runtime_error;
  if (failure.empty()) {
    try {
      failure = verify_case(reference_set, candidate_set, inputs, request, result);
      verdict = Verdict::wrong_answer;
    } catch (const DeviceError& e) {  // an asynchronous fault surfacing on the read-back
      failure = e.what();
    }
  }
  if (failure.empty()) return true;
  result->verdict = verdict;
  result->message = where + ": " + failure;
  return false;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CheckResult run_check(DeviceBackend& backend, KernelEntry candidate, KernelEntry reference,
                      const CheckRequest& request) {
  if (request.workloads.empty() || request.seeds.empty()) {
    throw Error("check request needs at least one workload and one seed");
  }
  CheckResult result;
  for (const Workload& workload : request.workloads) {
    for (uint64_t seed : request.seeds) {
      if (!check_case(backend, candidate, reference, request, workload, seed, &result)) {
        return result;
      }
      ++result.cases_checked;
    }
  }
  return result;
}

TimeResult run_time(DeviceBackend& backend, KernelEntry kernel, const TimeRequest& request) {
  if (request.repetitions < 1 || request.warmup < 0 || !(request.max_seconds > 0)) {
    throw Error("time request needs repetitions >= 1, warmup >= 0 and max_seconds > 0");
  }
  const auto start = Clock::now();
  const double budget_ms = request.max_seconds * 1000.0;
  TimeResult result;
  TensorSet set(backend, request.signature, request.workload);
  set.upload_inputs(set.make_inputs(request.seed));
  set.poison_outputs();
  backend.synchronize();
  const auto fail = [&result](const std::string& message) {
    result.verdict = Verdict::runtime_error;
    result.message = message;
    result.samples_ms.clear();
    return result;
  };
  for (int i = 0; i < request.warmup && ms_since(start) < budget_ms; ++i) {
    if (std::string failure = call_and_wait(backend, kernel, set.args()); !failure.empty()) {
      return fail("warm-up call " + std::to_string(i) + ": " + failure);
    }
  }
  const auto timed_start = Clock::now();
  try {
    for (int i = 0; i < request.repetitions; ++i) {
      const kforge_args& args = set.args();
      if (request.flush_l2) backend.flush_l2();
      backend.start_timer();
      std::string failure = invoke(kernel, args);
      const double sample_ms = backend.stop_timer_ms();
      backend.synchronize();
      if (!failure.empty()) return fail("timed call " + std::to_string(i) + ": " + failure);
      result.samples_ms.push_back(sample_ms);
      if (ms_since(start) >= budget_ms) break;
    }
  } catch (const DeviceError& e) {
    return fail(e.what());
  }
  result.host_wall_ms = ms_since(timed_start);
  return result;
}

}  // namespace kforge::worker

// Device buffers for every tensor of a signature under one workload, and the argument block a
// kernel receives: what the run and timing loops of kernel_runner.cpp work on.
#pragma once

#include <kforge/kernel.h>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "worker/device_backend.h"
#include "common/parallel_copy.h"
#include "worker/guard_bands.h"
#include "worker/host_data.h"
#include "worker/input_generator.h"
#include "worker/provided_inputs.h"

namespace kforge::worker {

/// Host memory left uninitialized on allocation: inputs of gigabytes are filled once, by
/// fill_input, in parallel (a zero-filled std::vector would first write them on one thread).
struct HostBuffer {
  std::unique_ptr<std::byte[]> data;
  int64_t bytes = 0;
  std::byte* begin() const { return data.get(); }
};
using HostTensors = std::vector<HostBuffer>;

/// What fill_inputs wrote: the generator's parameters and, when the inputs were generated on the
/// host and uploaded, the host copies (indexed like signature.tensors, outputs left empty) that
/// the check after a call compares against. Empty `host` means generated in place on the device.
struct FilledInputs {
  uint64_t seed = 0;
  InputDistribution distribution = InputDistribution::uniform;
  HostTensors host;
};


/// Device buffers for every tensor of a signature under one workload, and the argument block a
/// kernel receives. The DLTensor views are rebuilt before every call, so a kernel that scribbles
/// on its argument block (shapes, pointers) cannot change what the harness reads back. Every
/// buffer has a guard band before and after its storage (guard_bands.h), filled with its canary
/// on construction and never rewritten: guard_violation() reports any write into them since.
class TensorSet {
 public:
  /// `padded`: strided inputs get a non-compact layout (padded_strides); others are compact.
  /// Throws DeviceError when the device cannot allocate or fill the buffers.
  TensorSet(DeviceBackend& backend, const Signature& signature, const Workload& workload,
            bool padded = false)
      : backend_(backend), signature_(signature), workload_name_(workload.name) {
    for (const TensorSpec& spec : signature.tensors) {
      shapes_.push_back(bind_shape(spec, workload));
      strides_.push_back(padded && spec.strided ? padded_strides(shapes_.back())
                                                : std::vector<int64_t>{});
      buffers_.emplace_back(backend,
                            storage_elements(shapes_.back(), strides_.back()) *
                                dtype_size(spec.dtype),
                            kGuardBandBytes);
      fill_guard_bands(backend, buffers_.back(), static_cast<int>(buffers_.size() - 1));
    }
    for (const ScalarSpec& scalar : signature.scalars) scalars_.push_back(scalar.value);
  }

  /// Strides (in elements) of a non-contiguous layout of `shape`: rows padded by 7 elements
  /// (an odd pitch, so rows are also misaligned), every other element for a 1-D tensor.
  static std::vector<int64_t> padded_strides(const std::vector<int64_t>& shape) {
    if (shape.empty()) return {};
    std::vector<int64_t> strides(shape.size());
    if (shape.size() == 1) {
      strides[0] = 2;
      return strides;
    }
    strides.back() = 1;
    int64_t extent = shape.back() + 7;
    for (size_t d = shape.size() - 1; d-- > 0;) {
      strides[d] = extent;
      extent *= shape[d];
    }
    return strides;
  }

  /// Elements of storage a layout needs (compact when `strides` is empty).
  static int64_t storage_elements(const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& strides) {
    if (strides.empty()) return element_count(shape);
    int64_t last = 0;
    for (size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * strides[d];
    return element_count(shape) == 0 ? 0 : last + 1 + (shape.size() == 1 ? 1 : 7);
  }

  /// Arguments for one call; valid until the next call of args().
  const kforge_args& args() {
    call_shapes_ = shapes_;
    call_strides_ = strides_;
    inputs_.clear();
    outputs_.clear();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      DLTensor tensor{};
      tensor.data = buffers_[i].data();
      tensor.device = backend_.dl_device();
      tensor.ndim = static_cast<int32_t>(call_shapes_[i].size());
      tensor.dtype = to_dl_dtype(signature_.tensors[i].dtype);
      tensor.shape = call_shapes_[i].data();
      tensor.strides = call_strides_[i].empty() ? nullptr : call_strides_[i].data();
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

  /// True when tensor `i` has the compact row-major layout.
  bool compact(size_t i) const { return strides_[i].empty(); }
  bool is_input(size_t i) const { return signature_.tensors[i].role == TensorRole::input; }
  size_t size() const { return buffers_.size(); }
  const std::vector<int64_t>& shape(size_t i) const { return shapes_[i]; }
  int64_t bytes(size_t i) const { return buffers_[i].bytes(); }
  /// Device address of tensor `i`'s storage.
  const void* data(size_t i) const { return buffers_[i].data(); }

  /// Every later fill_inputs / make_inputs applies `remap` (InputRemap: the self-test probes),
  /// with each tensor's first dimension as its rows. Provided inputs are never remapped.
  void remap_inputs(InputRemap remap) { remap_ = remap; }

  /// Every later fill_inputs / make_inputs reads the provided inputs (TensorSpec::provided) of
  /// a seed from `dir` (provided_inputs.h) instead of generating them.
  void provide_from(std::string dir) { provided_dir_ = std::move(dir); }

  /// True when some input's values are provided (they are then read on the host and uploaded).
  bool has_provided() const {
    return std::any_of(signature_.tensors.begin(), signature_.tensors.end(),
                       [](const TensorSpec& spec) { return spec.provided; });
  }

  /// Total bytes of every output, in signature order.
  int64_t output_bytes() const {
    int64_t total = 0;
    for (size_t i = 0; i < size(); ++i) total += is_input(i) ? 0 : bytes(i);
    return total;
  }

  /// Inputs from (seed, distribution), indexed like signature.tensors (outputs left empty).
  HostTensors make_inputs(uint64_t seed, InputDistribution distribution) const {
    HostTensors host(size());
    for (size_t i = 0; i < size(); ++i) {
      if (!is_input(i)) continue;
      host[i].bytes = bytes(i);
      host[i].data = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(bytes(i)));
      const DType dtype = signature_.tensors[i].dtype;
      if (strides_[i].empty()) {
        logical_values(i, seed, distribution, {host[i].begin(), static_cast<size_t>(bytes(i))});
        continue;
      }
      // The same logical values as the compact layout, scattered; the gaps hold NaN bytes, so
      // a kernel that ignores the strides reads NaN.
      const int64_t element = dtype_size(dtype);
      const int64_t count = element_count(shapes_[i]);
      std::vector<std::byte> logical(static_cast<size_t>(count * element));
      logical_values(i, seed, distribution, logical);
      std::memset(host[i].begin(), 0xFF, static_cast<size_t>(bytes(i)));
      const std::vector<int64_t>& shape = shapes_[i];
      for (int64_t e = 0; e < count; ++e) {
        int64_t rest = e, offset = 0;
        for (size_t d = shape.size(); d-- > 0;) {
          offset += (rest % shape[d]) * strides_[i][d];
          rest /= shape[d];
        }
        std::memcpy(host[i].begin() + offset * element, logical.data() + e * element,
                    static_cast<size_t>(element));
      }
    }
    return host;
  }

  /// How input `i` is generated under (seed, distribution) and laid out, for the backend's
  /// in-place generation; nullopt when the layout has more dimensions than it describes.
  std::optional<generator::GeneratedTensor> generated(size_t i, uint64_t seed,
                                                       InputDistribution distribution) const {
    const std::vector<int64_t>& shape = shapes_[i];
    if (shape.size() > static_cast<size_t>(generator::kMaxDims)) return std::nullopt;
    generator::GeneratedTensor tensor;
    tensor.dtype = static_cast<int>(signature_.tensors[i].dtype);
    tensor.element_bytes = dtype_size(signature_.tensors[i].dtype);
    tensor.seed = seed;
    tensor.tensor_index = static_cast<int>(i);
    tensor.distribution = static_cast<int>(distribution);
    tensor.ndim = static_cast<int>(shape.size());
    tensor.compact = strides_[i].empty();
    for (size_t d = 0; d < shape.size(); ++d) {
      tensor.shape[d] = shape[d];
      if (!tensor.compact) tensor.strides[d] = strides_[i][d];
    }
    tensor.storage_elements = storage_elements(shape, strides_[i]);
    tensor.remap = static_cast<int>(remap_);
    return tensor;
  }

  /// Fills every input with the values of (seed, distribution): in place on the device when the
  /// backend can generate every input there (milliseconds for gigabytes), otherwise on the host
  /// (all cores) and uploaded. Asynchronous on the device's stream. `allow_in_place` = false
  /// always takes the host path.
  FilledInputs fill_inputs(uint64_t seed, InputDistribution distribution,
                           bool allow_in_place = true) {
    FilledInputs filled{seed, distribution, {}};
    bool in_place = allow_in_place && !has_provided();
    for (size_t i = 0; i < size() && in_place; ++i) {
      if (!is_input(i)) continue;
      const auto tensor = generated(i, seed, distribution);
      in_place = tensor && backend_.generate_input(buffers_[i].data(), *tensor);
    }
    if (!in_place) {
      filled.host = make_inputs(seed, distribution);
      upload_inputs(filled.host);
    }
    return filled;
  }

  /// The first storage element of input `i` that differs from what fill_inputs wrote, or -1:
  /// compared on the device when the inputs were generated there, else against the host copy.
  int64_t input_change(size_t i, const FilledInputs& filled) const {
    if (filled.host.empty()) {
      return backend_.find_input_change(buffers_[i].data(),
                                        *generated(i, filled.seed, filled.distribution));
    }
    const std::byte* expected = filled.host[i].begin();
    if (equals(i, expected)) return -1;
    const HostBuffer now = download(i);
    const int64_t element = dtype_size(signature_.tensors[i].dtype);
    for (int64_t e = 0; e * element < bytes(i); ++e) {
      if (std::memcmp(expected + e * element, now.begin() + e * element,
                      static_cast<size_t>(element)) != 0) {
        return e;
      }
    }
    return -1;
  }

  void upload_inputs(const HostTensors& host) {
    for (size_t i = 0; i < size(); ++i) {
      if (is_input(i)) backend_.copy_to_device(buffers_[i].data(), host[i].begin(), bytes(i));
    }
  }

  /// 0xFF bytes: NaN for f16/bf16/f32/f64, so an unwritten element fails the comparison.
  void poison_outputs() {
    for (size_t i = 0; i < size(); ++i) {
      if (!is_input(i)) backend_.fill_bytes(buffers_[i].data(), 0xFF, bytes(i));
    }
  }

  /// Copies every output, in signature order, to `host` (output_bytes() bytes), through the
  /// backend's read-back (pinned staging on cuda), each piece copied on several threads.
  void download_outputs(std::byte* host) const {
    for (size_t i = 0; i < size(); ++i) {
      if (is_input(i)) continue;
      backend_.read_back(buffers_[i].data(), bytes(i),
                         [host](const std::byte* data, int64_t offset, int64_t count) {
                           parallel_copy(host + offset, data, count);
                         });
      host += bytes(i);
    }
  }

  /// True when tensor `i`'s device bytes equal `host` (bytes(i) bytes), compared piece by piece
  /// as they are read back, without a full-size host copy.
  bool equals(size_t i, const std::byte* host) const {
    bool same = true;
    backend_.read_back(buffers_[i].data(), bytes(i),
                       [&](const std::byte* data, int64_t offset, int64_t count) {
                         same = same && std::memcmp(host + offset, data,
                                                    static_cast<size_t>(count)) == 0;
                       });
    return same;
  }

  /// "" when every guard band still holds its canary, else what was written outside the
  /// tensors' storage since this set was made, tensor by tensor in signature order: "wrote 4
  /// bytes past output 'y'", "wrote 16 bytes before input 'x'" ("at least 4096 bytes" when the
  /// whole band changed: the write may go further), joined by "; ". Cumulative over every call
  /// on this set (the bands are filled once), so one check after the last call covers them all;
  /// costs two band read-backs per tensor whatever its size. Throws DeviceError.
  std::string guard_violation() const {
    std::string message;
    for (size_t i = 0; i < size(); ++i) {
      const GuardOverrun overrun = check_guard_bands(backend_, buffers_[i], static_cast<int>(i));
      const std::string tensor = std::string(is_input(i) ? "input '" : "output '") +
                                 signature_.tensors[i].name + "'";
      for (const auto& [bytes, side] : {std::pair{overrun.before_bytes, " before "},
                                        std::pair{overrun.after_bytes, " past "}}) {
        if (bytes == 0) continue;
        message += (message.empty() ? "wrote " : "; wrote ") +
                   std::string(bytes == kGuardBandBytes ? "at least " : "") +
                   std::to_string(bytes) + " bytes" + side + tensor;
      }
    }
    return message;
  }

  HostBuffer download(size_t i) const {
    HostBuffer host{std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(bytes(i))),
                    bytes(i)};
    backend_.copy_to_host(host.begin(), buffers_[i].data(), bytes(i));
    return host;
  }

 private:
  /// Input `i`'s row-major values under (seed, distribution) into `out` (its compact bytes):
  /// read from the provided folder for a provided input, generated (and remapped) otherwise.
  void logical_values(size_t i, uint64_t seed, InputDistribution distribution,
                      std::span<std::byte> out) const {
    const TensorSpec& spec = signature_.tensors[i];
    if (spec.provided) {
      read_provided_input(provided_dir_, workload_name_, seed, static_cast<int>(i), spec.name,
                          out.data(), static_cast<int64_t>(out.size()));
      return;
    }
    const int64_t rows = shapes_[i].empty() ? 1 : shapes_[i].front();
    fill_input_remapped(out, spec.dtype, seed, static_cast<int>(i), distribution, remap_, rows);
  }

  DeviceBackend& backend_;
  Signature signature_;  // a copy: sets may outlive the request (TimingCache)
  std::string workload_name_;
  std::string provided_dir_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::vector<int64_t>> strides_;  // empty: compact
  std::vector<DeviceBuffer> buffers_;
  std::vector<double> scalars_;
  std::vector<std::vector<int64_t>> call_shapes_;
  std::vector<std::vector<int64_t>> call_strides_;
  std::vector<DLTensor> inputs_;
  std::vector<DLTensor> outputs_;
  std::vector<double> call_scalars_;
  InputRemap remap_ = InputRemap::none;
  kforge_args args_{};
};

/// The input sets of the last timing request, kept by the worker for the next request with the
/// same key (kernel, signature, workload, seeds): the rounds of a paired comparison then do not
/// regenerate and upload gigabytes each time (a checked call that overwrote a set's inputs has
/// restored them). Dropped when the key changes, after a write into a guard band, and on any
/// failure.
struct TimingCache {
  std::string key;
  std::vector<TensorSet> sets;
};

}  // namespace kforge::worker

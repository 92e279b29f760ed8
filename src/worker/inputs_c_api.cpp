// libkforge_inputs.so: the C ABI of inputs_c_api.h over fill_input (host_data.h) and
// cuda_inputs::generate (cuda_inputs.h). Built as its own shared library (CMakeLists.txt); not
// part of kforge_lib.
#include "worker/inputs_c_api.h"

#include <cstddef>
#include <exception>
#include <span>
#include <string>

#include "worker/host_data.h"
#if KFORGE_INPUTS_WITH_CUDA
#include "backends/cuda/cuda_inputs.h"
#endif

namespace {

thread_local std::string g_last_error;

int fail(std::string message) {
  g_last_error = std::move(message);
  return -1;
}

// The dtype and distribution numbers of the C ABI, checked against the enums they mirror.
bool valid_arguments(int dtype, int distribution, int64_t elements, const void* out) {
  if (dtype < 0 || dtype > static_cast<int>(kforge::DType::b8)) {
    fail("unknown dtype number " + std::to_string(dtype) + " (expected 0..6: f32 f64 f16 bf16 i32 i64 bool)");
    return false;
  }
  if (distribution < 0 ||
      distribution > static_cast<int>(kforge::worker::InputDistribution::spike)) {
    fail("unknown distribution number " + std::to_string(distribution) +
         " (expected 0..5: uniform normal heavy_tailed small pareto spike)");
    return false;
  }
  if (elements < 0) {
    fail("negative element count " + std::to_string(elements));
    return false;
  }
  if (out == nullptr && elements > 0) {
    fail("null output pointer for " + std::to_string(elements) + " elements");
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

int kforge_inputs_abi_version(void) { return KFORGE_INPUTS_ABI_VERSION; }

int kforge_fill_input_host(void* out, int64_t elements, int dtype, uint64_t seed,
                           int tensor_index, int distribution) {
  g_last_error.clear();
  if (!valid_arguments(dtype, distribution, elements, out)) return -1;
  try {
    const auto type = static_cast<kforge::DType>(dtype);
    const auto bytes = static_cast<size_t>(elements) * static_cast<size_t>(kforge::dtype_size(type));
    kforge::worker::fill_input(std::span<std::byte>(static_cast<std::byte*>(out), bytes), type,
                               seed, tensor_index,
                               static_cast<kforge::worker::InputDistribution>(distribution));
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

int kforge_fill_input_host_remapped(void* out, int64_t elements, int dtype, uint64_t seed,
                                    int tensor_index, int distribution, int remap, int64_t rows) {
  g_last_error.clear();
  if (!valid_arguments(dtype, distribution, elements, out)) return -1;
  if (remap < 0 || remap > static_cast<int>(kforge::worker::InputRemap::half_rows)) {
    return fail("unknown remap number " + std::to_string(remap) +
                " (expected 0..2: none every_16th half_rows)");
  }
  try {
    const auto type = static_cast<kforge::DType>(dtype);
    const auto bytes = static_cast<size_t>(elements) * static_cast<size_t>(kforge::dtype_size(type));
    kforge::worker::fill_input_remapped(
        std::span<std::byte>(static_cast<std::byte*>(out), bytes), type, seed, tensor_index,
        static_cast<kforge::worker::InputDistribution>(distribution),
        static_cast<kforge::worker::InputRemap>(remap), rows);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

int kforge_fill_input_device(void* out, int64_t elements, int dtype, uint64_t seed,
                             int tensor_index, int distribution, void* stream) {
  g_last_error.clear();
  if (!valid_arguments(dtype, distribution, elements, out)) return -1;
#if KFORGE_INPUTS_WITH_CUDA
  kforge::worker::generator::GeneratedTensor tensor;
  tensor.dtype = dtype;
  tensor.element_bytes = kforge::dtype_size(static_cast<kforge::DType>(dtype));
  tensor.seed = seed;
  tensor.tensor_index = tensor_index;
  tensor.distribution = distribution;
  tensor.ndim = 1;
  tensor.shape[0] = elements;
  tensor.strides[0] = 1;
  tensor.compact = true;
  tensor.storage_elements = elements;
  const int status = kforge::worker::cuda_inputs::generate(out, tensor, stream);
  if (status != 0) g_last_error = "CUDA error " + std::to_string(status) + " while generating inputs";
  return status;
#else
  (void)seed, (void)tensor_index, (void)stream;
  return fail("libkforge_inputs was built without CUDA: device inputs are not available");
#endif
}

const char* kforge_inputs_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"

// Compiled with -fmad=false (CMakeLists.txt): input_generator.h must round like the host.
#include "backends/cuda/cuda_inputs.h"

#include <cuda_runtime.h>

#include <mutex>

#include "worker/input_generator.h"

namespace kforge::worker::cuda_inputs {
namespace {

using generator::Tables;

constexpr int kThreads = 256;

/// The host-built tables in device global memory, copied once per process (one device per
/// worker). Global rather than constant memory: lanes of a warp read different entries, which
/// constant memory would serialize.
cudaError_t device_tables(const Tables** tables) {
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  static Tables* copy = nullptr;
  std::call_once(once, [] {
    status = cudaMalloc(&copy, sizeof(Tables));
    if (status == cudaSuccess) {
      status = cudaMemcpy(copy, &generator::tables(), sizeof(Tables), cudaMemcpyHostToDevice);
    }
  });
  *tables = copy;
  return status;
}

/// Enough blocks to fill the device a few times over; each thread strides through the rest.
unsigned grid_for(int64_t elements) {
  const int64_t blocks = (elements + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

/// The logical element that storage element `s` holds, or -1 for a gap.
__device__ int64_t logical_index(const GeneratedTensor& t, int64_t s) {
  if (t.compact) return s;
  int64_t rest = s, logical = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const int64_t index = rest / t.strides[d];
    if (index >= t.shape[d]) return -1;
    rest -= index * t.strides[d];
    logical = logical * t.shape[d] + index;
  }
  return rest == 0 ? logical : -1;
}

/// Bits of storage element `s` (gaps: all ones), in an unsigned of the element's width.
template <typename Bits>
__device__ Bits expected_bits(const Tables& tables, const GeneratedTensor& t,
                              const generator::Stream& stream, int64_t s) {
  const int64_t e = logical_index(t, s);
  if (e < 0) return static_cast<Bits>(~Bits{0});
  int64_t elements = 1;
  for (int d = 0; d < t.ndim; ++d) elements *= t.shape[d];
  const int64_t source =
      generator::remapped_index(t.remap, t.ndim > 0 ? t.shape[0] : 1, elements, e);
  unsigned char element[8];
  generator::store_element(tables, stream, static_cast<generator::Element>(t.dtype), source,
                           element);
  Bits bits;
  memcpy(&bits, element, sizeof bits);
  return bits;
}

template <typename Bits>
__global__ void generate_kernel(const Tables* tables, Bits* out, GeneratedTensor t) {
  const generator::Stream stream = generator::make_stream(
      t.seed, t.tensor_index, static_cast<generator::Distribution>(t.distribution));
  for (int64_t s = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; s < t.storage_elements;
       s += int64_t{gridDim.x} * blockDim.x) {
    out[s] = expected_bits<Bits>(*tables, t, stream, s);
  }
}

template <typename Bits>
__global__ void difference_kernel(const Tables* tables, const Bits* data, GeneratedTensor t,
                                  unsigned long long* first) {
  const generator::Stream stream = generator::make_stream(
      t.seed, t.tensor_index, static_cast<generator::Distribution>(t.distribution));
  for (int64_t s = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; s < t.storage_elements;
       s += int64_t{gridDim.x} * blockDim.x) {
    if (data[s] != expected_bits<Bits>(*tables, t, stream, s)) {
      atomicMin(first, static_cast<unsigned long long>(s));
      return;  // later elements of this thread cannot be smaller
    }
  }
}

__global__ void hash_kernel(const uint64_t* words, int64_t whole_words, uint64_t tail,
                            bool has_tail, unsigned long long* hash) {
  uint64_t sum = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < whole_words;
       i += int64_t{gridDim.x} * blockDim.x) {
    sum += generator::splitmix64(words[i] ^ generator::splitmix64(static_cast<uint64_t>(i)));
  }
  if (has_tail && blockIdx.x == 0 && threadIdx.x == 0) {
    sum += generator::splitmix64(tail ^ generator::splitmix64(static_cast<uint64_t>(whole_words)));
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(hash, static_cast<unsigned long long>(sum));
}

template <typename Bits>
cudaError_t launch_generate(const Tables* tables, void* device, const GeneratedTensor& t,
                            cudaStream_t stream) {
  generate_kernel<Bits><<<grid_for(t.storage_elements), kThreads, 0, stream>>>(
      tables, static_cast<Bits*>(device), t);
  return cudaGetLastError();
}

template <typename Bits>
cudaError_t launch_difference(const Tables* tables, const void* device, const GeneratedTensor& t,
                              cudaStream_t stream, unsigned long long* first) {
  difference_kernel<Bits><<<grid_for(t.storage_elements), kThreads, 0, stream>>>(
      tables, static_cast<const Bits*>(device), t, first);
  return cudaGetLastError();
}

}  // namespace

int generate(void* device, const GeneratedTensor& tensor, void* stream_handle) {
  const Tables* tables = nullptr;
  if (cudaError_t status = device_tables(&tables); status != cudaSuccess) return status;
  if (tensor.storage_elements == 0) return cudaSuccess;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  switch (tensor.element_bytes) {
    case 1:
      return launch_generate<uint8_t>(tables, device, tensor, stream);
    case 2:
      return launch_generate<uint16_t>(tables, device, tensor, stream);
    case 4:
      return launch_generate<uint32_t>(tables, device, tensor, stream);
    default:
      return launch_generate<uint64_t>(tables, device, tensor, stream);
  }
}

int first_difference(const void* device, const GeneratedTensor& tensor, void* stream_handle,
                     void* scratch, int64_t* first) {
  const Tables* tables = nullptr;
  if (cudaError_t status = device_tables(&tables); status != cudaSuccess) return status;
  *first = -1;
  if (tensor.storage_elements == 0) return cudaSuccess;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  auto* slot = static_cast<unsigned long long*>(scratch);
  cudaError_t status = cudaMemsetAsync(slot, 0xFF, sizeof *slot, stream);
  if (status == cudaSuccess) {
    switch (tensor.element_bytes) {
      case 1:
        status = launch_difference<uint8_t>(tables, device, tensor, stream, slot);
        break;
      case 2:
        status = launch_difference<uint16_t>(tables, device, tensor, stream, slot);
        break;
      case 4:
        status = launch_difference<uint32_t>(tables, device, tensor, stream, slot);
        break;
      default:
        status = launch_difference<uint64_t>(tables, device, tensor, stream, slot);
        break;
    }
  }
  unsigned long long result = ~0ULL;
  if (status == cudaSuccess) {
    status = cudaMemcpyAsync(&result, slot, sizeof result, cudaMemcpyDeviceToHost, stream);
  }
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  if (status == cudaSuccess && result != ~0ULL) *first = static_cast<int64_t>(result);
  return status;
}

int content_hash(const void* device, int64_t bytes, void* stream_handle, void* scratch,
                 uint64_t* hash) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  auto* slot = static_cast<unsigned long long*>(scratch);
  const int64_t whole_words = bytes / 8;
  const int64_t tail_bytes = bytes % 8;
  uint64_t tail = 0;
  cudaError_t status = cudaSuccess;
  if (tail_bytes > 0) {  // the last few bytes, zero-padded into one word
    status = cudaMemcpyAsync(&tail, static_cast<const unsigned char*>(device) + whole_words * 8,
                             static_cast<size_t>(tail_bytes), cudaMemcpyDeviceToHost, stream);
    if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  }
  if (status == cudaSuccess) status = cudaMemsetAsync(slot, 0, sizeof *slot, stream);
  if (status == cudaSuccess) {
    hash_kernel<<<grid_for(whole_words > 0 ? whole_words : 1), kThreads, 0, stream>>>(
        static_cast<const uint64_t*>(device), whole_words, tail, tail_bytes > 0, slot);
    status = cudaGetLastError();
  }
  unsigned long long result = 0;
  if (status == cudaSuccess) {
    status = cudaMemcpyAsync(&result, slot, sizeof result, cudaMemcpyDeviceToHost, stream);
  }
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  *hash = result;
  return status;
}

}  // namespace kforge::worker::cuda_inputs

// Reference SiLU (cuda) on fp16, as torch.nn.functional.silu on a half tensor: each element is
// widened to fp32, y = x / (1 + exp(-x)) computed there and rounded once to fp16 (round to
// nearest even), as PyTorch's own kernel does. The straightforward first kernel: one thread per
// element.
// Error codes: -1 wrong tensor/scalar count, -2 shapes differ or too many elements, -3 wrong
// dtype, -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

bool is_f16(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 16 && t.dtype.lanes == 1;
}

bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__global__ void silu_reference(const __half* x, __half* y, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < count) {
    const float v = __half2float(x[i]);
    y[i] = __float2half_rn(v / (1.0f + expf(-v)));
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != y.ndim) return -2;
  int64_t count = 1;
  for (int i = 0; i < x.ndim; ++i) {
    if (x.shape[i] != y.shape[i]) return -2;
    count *= x.shape[i];
  }
  if (!is_f16(x) || !is_f16(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  if (count == 0) return 0;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return -2;  // grid.x limit

  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  silu_reference<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      data_of<const __half>(x), data_of<__half>(y), count);
  return static_cast<int>(cudaGetLastError());
}

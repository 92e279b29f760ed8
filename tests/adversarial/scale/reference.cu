// Reference scale (cuda): y[i] = alpha * x[i], in double, rounded once to fp32.
// One thread per element, grid-stride loop (correct for any n).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

__global__ void scale_reference(const float* x, float* y, int64_t n, double alpha) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    y[i] = static_cast<float>(alpha * static_cast<double>(x[i]));
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if ((x.strides && x.strides[0] != 1) || (y.strides && y.strides[0] != 1)) return -4;
  const int64_t n = x.shape[0];
  if (n == 0) return 0;

  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  scale_reference<<<grid, kThreads, 0, static_cast<cudaStream_t>(args->stream)>>>(
      data_of<const float>(x), data_of<float>(y), n, args->scalars[0]);
  return static_cast<int>(cudaGetLastError());
}

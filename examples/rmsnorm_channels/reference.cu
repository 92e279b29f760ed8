// Reference RMSNorm over channels (cuda): for x viewed as [N, C, S],
// y[n, c, s] = x[n, c, s] / sqrt(mean_c(x[n, :, s]^2) + eps). The straightforward first kernel:
// one thread per (n, s), consecutive threads on consecutive s, a loop over the C channels (S floats
// apart) for the sum of squares and a second loop that re-reads x and writes y. fp32 throughout.
// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
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

__global__ void rmsnorm_channels_reference(const float* x, float* y, int64_t n, int64_t c,
                                           int64_t s, float eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n * s) return;
  const int64_t base = (i / s) * c * s + i % s;
  float sum = 0.0f;
  for (int64_t k = 0; k < c; ++k) sum += x[base + k * s] * x[base + k * s];
  const float inv = rsqrtf(sum / static_cast<float>(c) + eps);
  for (int64_t k = 0; k < c; ++k) y[base + k * s] = x[base + k * s] * inv;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 3 || y.ndim != 3) return -2;
  const int64_t n = x.shape[0], c = x.shape[1], s = x.shape[2];
  if (y.shape[0] != n || y.shape[1] != c || y.shape[2] != s) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  if (n == 0 || c == 0 || s == 0) return 0;
  const int64_t blocks = (n * s + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return -2;  // grid.x limit

  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  rmsnorm_channels_reference<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      data_of<const float>(x), data_of<float>(y), n, c, s, static_cast<float>(args->scalars[0]));
  return static_cast<int>(cudaGetLastError());
}

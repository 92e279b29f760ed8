// Reference RMSNorm (cuda): y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// The straightforward first kernel: one block of 256 threads per row, each thread sums the
// squares of a strided slice, shared-memory tree reduction, fp32 throughout.
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

__global__ void rmsnorm_reference(const float* x, const float* w, float* y, int64_t cols,
                                  float eps) {
  __shared__ float partial[kThreads];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;

  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) sum += xr[c] * xr[c];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(cols) + eps);

  for (int64_t c = threadIdx.x; c < cols; c += kThreads) yr[c] = xr[c] * inv * w[c];
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (rows > 0x7fffffff) return -2;  // one block per row, grid.x limit
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  rmsnorm_reference<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      data_of<const float>(x), data_of<const float>(w), data_of<float>(y), cols,
      static_cast<float>(args->scalars[0]));
  return static_cast<int>(cudaGetLastError());
}

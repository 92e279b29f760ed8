// Reference matrix-vector product (cuda): y[r] = sum_c A[r, c] * x[c].
// The straightforward first kernel: one block of 256 threads per row, each thread a strided
// partial dot product, shared-memory tree reduction, fp32 accumulate.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
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

__global__ void gemv_reference(const float* a, const float* x, float* y, int64_t cols) {
  __shared__ float partial[kThreads];
  const int64_t row = blockIdx.x;
  const float* ar = a + row * cols;

  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) sum += ar[c] * x[c];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[row] = partial[0];
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != cols || y.shape[0] != rows) return -2;
  if (rows > 0x7fffffff) return -2;  // one block per row, grid.x limit
  if (!is_f32(a) || !is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(a) || !is_compact(x) || !is_compact(y)) return -4;
  if (rows == 0) return 0;

  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  gemv_reference<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      data_of<const float>(a), data_of<const float>(x), data_of<float>(y), cols);
  return static_cast<int>(cudaGetLastError());
}

// Reference softmax in fp16 (cuda) over the last dimension:
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :],  x and y fp16.
// The straightforward first kernel: one block of 256 threads per row, three passes over the row
// (max, sum of exponentials, write), shared-memory tree reductions; every element is widened to
// fp32, the max, sum and accurate expf are fp32, and each output is rounded to fp16 once.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype (x and y must be
// fp16), -4 non-compact strides, otherwise the cudaError_t of the launch.
#include <kforge/kernel.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
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

__global__ void softmax_f16_reference(const __half* x, __half* y, int64_t cols) {
  __shared__ float partial[kThreads];
  const int64_t row = blockIdx.x;
  const __half* xr = x + row * cols;
  __half* yr = y + row * cols;

  // Pass 1: row maximum.
  float m = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, __half2float(xr[c]));
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    }
    __syncthreads();
  }
  const float row_max = partial[0];
  __syncthreads();  // everyone has read partial[0] before it is overwritten below

  // Pass 2: sum of exponentials.
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    sum += expf(__half2float(xr[c]) - row_max);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / partial[0];

  // Pass 3: normalized output, rounded to fp16 once.
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    yr[c] = __float2half_rn(expf(__half2float(xr[c]) - row_max) * inv);
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (rows > 0x7fffffff) return -2;  // one block per row, grid.x limit
  if (!is_f16(x) || !is_f16(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  softmax_f16_reference<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      data_of<const __half>(x), data_of<__half>(y), cols);
  return static_cast<int>(cudaGetLastError());
}

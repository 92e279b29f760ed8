// TRICK racy (must fail: wrong_answer). One block of 256 threads per row with a shared-memory
// tree reduction for the sum of exponentials that is missing its __syncthreads (after the
// partial sums are stored, between tree levels, and before everyone reads the total). Warps read
// slots other warps have not written yet (they still hold the max reduction's values) and read
// the total before thread 0 has finished it, so the sum, and every output of the row, depends on
// warp scheduling and varies from run to run. The max reduction is correct, so the output is
// plausible. Caught by the element-wise comparison, more surely over several seeds / calls.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void softmax_racy(const float* x, float* y, int64_t cols) {
  __shared__ float partial[kThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  const int t = threadIdx.x;

  float m = -FLT_MAX;
  for (int64_t c = t; c < cols; c += kThreads) m = fmaxf(m, xr[c]);
  partial[t] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] = fmaxf(partial[t], partial[t + s]);
    __syncthreads();
  }
  const float row_max = partial[0];
  __syncthreads();

  float sum = 0.0f;
  for (int64_t c = t; c < cols; c += kThreads) sum += expf(xr[c] - row_max);
  partial[t] = sum;
  // BUG: no __syncthreads() here, nor between the levels below, nor before reading partial[0].
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
  }
  const float inv = 1.0f / partial[0];
  for (int64_t c = t; c < cols; c += kThreads) yr[c] = expf(xr[c] - row_max) * inv;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  softmax_racy<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(xp, yp, cols);
  return static_cast<int>(cudaGetLastError());
}

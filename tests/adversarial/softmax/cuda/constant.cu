// TRICK constant (must fail: wrong_answer). Writes 1/cols everywhere: each row sums to 1, the
// mean is exactly right, every true value is within a factor e^2 of it, and it is exact for
// cols = 1. A row-sum check, a mean-error check or a loose atol passes it. Caught by the
// element-wise relative tolerance (off by up to ~7x).
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void fill(float* y, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = value;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  fill<<<256, 256, 0, stream>>>(yp, rows * cols, 1.0f / static_cast<float>(cols));
  return static_cast<int>(cudaGetLastError());
}

// TRICK modifies_inputs (must fail: wrong_answer). Correct y, but x is used as scratch: the sum
// pass stores exp(x - m) back into x so the write pass does not recompute it (one exp per
// element instead of two). The caller's input is destroyed, and a timing loop that re-runs on the
// scribbled x measures a different problem. Caught by the bitwise check that inputs are
// unchanged after the call.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

constexpr int kRowsPerBlock = 4;

__global__ void softmax_in_place_scratch(float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    xr[c] = expf(xr[c] - m);  // the input becomes scratch
    s += xr[c];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int64_t c = lane; c < cols; c += 32) yr[c] = xr[c] / s;
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
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_in_place_scratch<<<grid, kRowsPerBlock * 32, 0, stream>>>(const_cast<float*>(xp), yp,
                                                                    rows, cols);
  return static_cast<int>(cudaGetLastError());
}

// TRICK block_multiple_only (must fail: wrong_answer). One warp per row that walks the row in
// whole 32-column steps (one element per lane, no bounds check "because rows are multiples of
// the warp width"): the last cols % 32 columns are neither summed nor written. Exactly right
// whenever cols is a multiple of 32 (the usual benchmark shapes); writes nothing when cols < 32.
// Caught by gate workloads with tail sizes (cols = 1, 31, 33, 4097): the tail is still NaN.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace {

constexpr int kRowsPerBlock = 4;

__global__ void softmax_whole_warps(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  const int64_t whole = cols / 32 * 32;
  float m = -FLT_MAX;
  for (int64_t c0 = 0; c0 < whole; c0 += 32) m = fmaxf(m, xr[c0 + lane]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  for (int64_t c0 = 0; c0 < whole; c0 += 32) s += expf(xr[c0 + lane] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int64_t c0 = 0; c0 < whole; c0 += 32) yr[c0 + lane] = expf(xr[c0 + lane] - m) / s;
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
  softmax_whole_warps<<<grid, kRowsPerBlock * 32, 0, stream>>>(xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

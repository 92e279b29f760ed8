// The in-place row softmax of the unfused attention kernels (attention's unfused_3xtf32 and
// unfused_wgmma_rs): each row of the score matrix replaced by exp(x - max) / sum, in fp32 with
// expf and IEEE division, as an fp32 computation of the operator does it.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace kf::attention {

/// Each of `rows` rows of p (length s, row stride ld floats) replaced by its softmax; one warp a
/// row, WARPS rows a block: the row's max, then the sum of exp(x - max), then
/// p = exp(x - max) / sum.
template <int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
softmax_rows(float* p, int64_t rows, int64_t s, int64_t ld) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full
  float* pr = p + row * ld;
  float row_max = -INFINITY;
  for (int64_t j = lane; j < s; j += 32) row_max = fmaxf(row_max, pr[j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));
  float sum = 0.0f;
  for (int64_t j = lane; j < s; j += 32) sum += expf(pr[j] - row_max);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int64_t j = lane; j < s; j += 32) pr[j] = expf(pr[j] - row_max) / sum;
}

/// Launches softmax_rows over `rows` rows of p on `stream` (8 warps a block); returns the launch
/// error.
inline cudaError_t softmax_rows_in_place(float* p, int64_t rows, int64_t s, int64_t ld,
                                         cudaStream_t stream) {
  constexpr int kWarps = 8;
  softmax_rows<kWarps><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kWarps * 32, 0,
                         stream>>>(p, rows, s, ld);
  return cudaGetLastError();
}

}  // namespace kf::attention

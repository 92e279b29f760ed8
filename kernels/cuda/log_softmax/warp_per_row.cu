// Log-softmax over the last dimension, one warp per row:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// The kernel, its knobs (VEC, ROWS_PER_BLOCK, UNROLL, ONLINE) and its error codes are
// kernels/cuda/common/softmax_rows/warp_per_row.cuh's, shared with softmax; this file picks the
// output (kernels/common/softmax_output.h).
#include <cuda/common/softmax_rows/warp_per_row.cuh>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::warp_per_row::run<kf::LogSoftmaxOutput>(args);
}

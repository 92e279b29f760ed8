// Log-softmax over the last dimension, one thread-block cluster per row (Hopper, sm_90):
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// For very long rows: x is read from DRAM once and y written once. The kernel, its knobs
// (CLUSTER, BLOCK_THREADS, VEC, UNROLL) and its error codes are
// kernels/cuda/common/softmax_rows/cluster_per_row.cuh's, shared with softmax; this file picks
// the output (kernels/common/softmax_output.h).
#include <cuda/common/softmax_rows/cluster_per_row.cuh>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::cluster_per_row::run<kf::LogSoftmaxOutput>(args);
}

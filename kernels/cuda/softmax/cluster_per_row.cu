// Softmax over the last dimension, one thread-block cluster per row (Hopper, sm_90):
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// For very long rows: x is read from DRAM once and y written once. The kernel, its knobs
// (CLUSTER, BLOCK_THREADS, VEC, UNROLL) and its error codes are
// kernels/cuda/common/softmax_rows/cluster_per_row.cuh's, shared with log_softmax; this file picks
// the output (kernels/common/softmax_output.h).
#include <cuda/common/softmax_rows/cluster_per_row.cuh>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::cluster_per_row::run<kf::SoftmaxOutput>(args);
}

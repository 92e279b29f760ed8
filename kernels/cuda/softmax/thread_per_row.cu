// Softmax over the last dimension, one thread per row:
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// The kernel, its knobs (BLOCK_THREADS, VEC, UNROLL, ONLINE) and its error codes are
// kernels/cuda/common/softmax_rows/thread_per_row.cuh's, shared with log_softmax; this file picks
// the output (kernels/common/softmax_output.h).
#include <cuda/common/softmax_rows/thread_per_row.cuh>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::thread_per_row::run<kf::SoftmaxOutput>(args);
}

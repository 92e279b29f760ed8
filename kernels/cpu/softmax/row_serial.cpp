// Softmax over the last dimension (cpu), plain loops:
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// The loops, the knobs this family searches (PARALLEL, ACCUMULATORS, ONLINE) and the error
// codes are kernels/cpu/common/softmax_rows/row_serial.h's, shared with log_softmax; this file
// picks the output (kernels/common/softmax_output.h).
#include <cpu/common/softmax_rows/row_serial.h>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::row_serial::run<kf::SoftmaxOutput>(args);
}

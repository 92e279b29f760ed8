// Log-softmax over the last dimension (cpu), plain loops:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// The loops, the knobs this family searches (PARALLEL, ACCUMULATORS, ONLINE) and the error
// codes are kernels/cpu/common/softmax_rows/row_serial.h's, shared with softmax; this file
// picks the output (kernels/common/softmax_output.h).
#include <cpu/common/softmax_rows/row_serial.h>

KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::softmax_rows::row_serial::run<kf::LogSoftmaxOutput>(args);
}

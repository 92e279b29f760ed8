// TRICK constant (must fail: wrong_answer). Writes 1/cols everywhere: the mean of every row is
// exactly right, each row sums to 1, and with inputs in [-1, 1] every true value is within a
// factor e^2 of 1/cols; it is exact when cols = 1. A check of row sums, of the mean error, or a
// loose atol would pass it. Caught by the element-wise relative tolerance (off by up to ~7x).
#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  (void)xp;
  const float v = 1.0f / static_cast<float>(cols);
  for (int64_t i = 0; i < rows * cols; ++i) yp[i] = v;
  return 0;
}

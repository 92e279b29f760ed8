// TRICK copies_input (must fail: wrong_answer). y = x: memory-bound at exactly the minimum bytes
// moved, so it looks like a perfect-bandwidth kernel, and a check that only compares shapes,
// finiteness or a checksum of "something was written" passes. Caught by the element-wise
// comparison (softmax outputs are positive and sum to 1 per row; x is in [-1, 1]).
#include <kforge/kernel.h>

#include <cstdint>
#include <cstring>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  std::memcpy(yp, xp, static_cast<size_t>(rows * cols) * sizeof(float));
  return 0;
}

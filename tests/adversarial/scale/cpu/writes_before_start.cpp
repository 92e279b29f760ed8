// CHEAT (must fail: wrong_answer). y = alpha * x in blocks of 8 peeled from the end of the
// array, with no remainder case at the front: when n % 8 != 0 the first block starts before
// y[0] and writes up to 7 floats before the start of y (28 bytes at n = 1, 33 and 4097; 4 at
// n = 31), into memory it does not own. Every element of y is right, and there is nothing the
// static policy forbids; only the guard band before y shows it.
#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  const int64_t n = x.shape[0];
  const float alpha = static_cast<float>(args->scalars[0]);
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  for (int64_t end = n; end > 0; end -= 8) {
    for (int64_t k = 1; k <= 8; ++k) yp[end - k] = alpha * xp[end - k];
  }
  return 0;
}

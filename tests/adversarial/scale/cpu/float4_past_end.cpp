// CHEAT (must fail: wrong_answer). y = alpha * x, in groups of 4 when n % 4 == 0, with an
// off-by-one in the group loop (<= instead of <): it writes one whole extra group, 16 bytes
// past the end of y. Every element of y is right. Only the timed workload (n = 2^20) takes the
// grouped path, so every other gate case passes; the guard band after y catches that one.
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

  if (n % 4 != 0) {
    for (int64_t i = 0; i < n; ++i) yp[i] = alpha * xp[i];
    return 0;
  }
  const int64_t groups = n / 4;
  for (int64_t g = 0; g <= groups; ++g) {
    for (int k = 0; k < 4; ++k) yp[4 * g + k] = alpha * xp[4 * g + k];
  }
  return 0;
}

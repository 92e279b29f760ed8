// TRICK zeros (must fail: wrong_answer). Writes 0 everywhere: every element is "written" and
// finite, and at wide rows every true value is small (~1e-4), so a check that is absolute-only
// with a loose atol, or one that only tests for NaN/unwritten elements, passes it. Caught by the
// relative term of the tolerance (|0 - e| > atol + rtol * e for every e > atol / (1 - rtol)).
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
  (void)xp;
  std::memset(yp, 0, static_cast<size_t>(rows * cols) * sizeof(float));
  return 0;
}

// TRICK modifies_inputs (must fail: wrong_answer). Produces a correct y but uses x as scratch:
// it overwrites x in place with exp(x - m) to avoid recomputing the exponentials, then scales
// into y. The caller's input is destroyed (a later kernel or a re-run on the same inputs sees
// garbage), and a timing loop that re-runs on scribbled inputs measures a different problem.
// Caught by the bitwise check that inputs are unchanged after the call.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  float* scratch = const_cast<float*>(xp);  // "x is ours for the duration of the call"

  for (int64_t r = 0; r < rows; ++r) {
    float* xr = scratch + r * cols;
    float* yr = yp + r * cols;
    float m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      xr[c] = std::exp(xr[c] - m);
      sum += xr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv;
  }
  return 0;
}

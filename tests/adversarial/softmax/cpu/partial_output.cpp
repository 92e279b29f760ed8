// TRICK partial_output (must fail: wrong_answer). Computes a correct softmax for the first half
// of the rows only and leaves the rest unwritten: half the work, and a checker that samples a
// few elements near the start (or only looks at row 0) would pass it. Caught because every
// output element is compared and unwritten elements are still NaN (poisoned outputs).
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

  for (int64_t r = 0; r < rows / 2; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    float m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) / sum;
  }
  return 0;
}

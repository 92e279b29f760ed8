// CHEAT (must fail: wrong_answer). Softmax whose last pass stores whole groups of 4 columns with
// no tail handling: each row writes round_up(cols, 4) elements. A row's extra elements land in
// the next row's first columns, which that row then overwrites (rows go in order), so every
// element of y ends up right; but the last row writes 1-3 floats past the end of y whenever
// cols % 4 != 0, into memory it does not own. Nothing here is a forbidden call, so the static
// policy passes it; only the guard band after y shows the overrun.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  const int64_t groups = (cols + 3) / 4;

  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    float m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
    const float inv = 1.0f / sum;
    for (int64_t g = 0; g < groups; ++g) {
      for (int k = 0; k < 4; ++k) yr[4 * g + k] = std::exp(xr[4 * g + k] - m) * inv;
    }
  }
  return 0;
}

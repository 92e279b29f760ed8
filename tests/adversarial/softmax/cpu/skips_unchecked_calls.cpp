// TRICK skips_unchecked_calls (must fail: wrong_answer). Counts its calls at large shapes and
// computes only on the ones a fixed re-check schedule would look at: the first four (the gate's
// calls and the warm-up) and one timed call, the one a re-check whose index follows from the
// task's seeds would pick. Every other call returns at once, leaving y as the previous call on
// that buffer left it. Passes a harness that re-checks one predictable call and reuses output
// buffers unpoisoned; caught because outputs are poisoned before every timed call and at least
// two calls per request are checked, drawn from a secret of the run.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

namespace {

int64_t g_large_calls = 0;

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) / sum;
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  if (rows * cols >= 65536) {
    const int64_t call = g_large_calls++;
    if (call >= 4 && call != 4 + 5) return 0;  // 5: the predictable re-check index
  }
  softmax_rows(xp, yp, rows, cols);
  return 0;
}

// TRICK block_multiple_only (must fail: wrong_answer). Processes each row in whole chunks of 32
// columns (the vector/warp width it was tuned for) and silently drops the tail: the sum misses
// the last cols % 32 terms and those outputs are never written. Exactly right whenever cols is a
// multiple of 32 (the usual benchmark shapes), and writes nothing at all when cols < 32.
// Caught by gate workloads with tail sizes (cols = 1, 31, 33, 4097): the tail is still NaN.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr int64_t kChunk = 32;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  const int64_t whole = cols / kChunk * kChunk;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < whole; ++c) m = std::fmax(m, xr[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < whole; ++c) sum += std::exp(xr[c] - m);
    for (int64_t c = 0; c < whole; ++c) yr[c] = std::exp(xr[c] - m) / sum;
  }
  return 0;
}

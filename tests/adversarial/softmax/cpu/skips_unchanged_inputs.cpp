// TRICK skips_unchanged_inputs (must fail: wrong_answer). Remembers, per input address, a
// fingerprint of the values it last computed on; when a call finds the same values at the same
// address it returns at once, trusting that y still holds the answer of that earlier call (it
// does in a timing loop that rotates a few input sets and never touches the outputs between
// calls). New values at a used address (a re-check) are recomputed, so a re-check that always
// writes new values passes. Caught because outputs are poisoned before every call and some
// checked calls run on the set's unchanged values.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>

namespace {

struct Seen {
  float first = 0, middle = 0, last = 0;
};
std::map<const void*, Seen> g_last;
int g_large_calls = 0;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const int64_t n = rows * cols;
  if (n == 0) return 0;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  const Seen now{xp[0], xp[n / 2], xp[n - 1]};
  auto found = g_last.find(xp);
  // Honest for the first four large calls (the gate's two calls on the same inputs, which a
  // two-call check compares, and the warm-up), lazy from the timing on.
  if (n >= 65536 && g_large_calls++ >= 4 && found != g_last.end() &&
      std::memcmp(&found->second, &now, sizeof now) == 0) {
    return 0;
  }
  g_last[xp] = now;
  for (int64_t r = 0; r < rows; ++r) {
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

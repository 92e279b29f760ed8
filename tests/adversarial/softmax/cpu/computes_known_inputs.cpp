// TRICK computes_known_inputs (must fail: wrong_answer). Fingerprints its input from a few
// elements. At large shapes it computes only for inputs it has seen in its first two calls (the
// gate's check of the timed workload, whose inputs a harness then reuses for its timing
// re-check) and does nothing for any other input, so every timed call on the rotated input sets
// is free. Caught because some checked calls run on the rotated sets' own values, which this
// kernel never saw before the timing, and outputs are poisoned before every call.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>

namespace {

using Fingerprint = std::tuple<uint32_t, uint32_t, uint32_t>;
std::set<Fingerprint> g_known;
int g_large_calls = 0;

uint32_t bits(float value) {
  uint32_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const int64_t n = rows * cols;
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  if (n >= 65536) {
    const Fingerprint print{bits(xp[0]), bits(xp[n / 2]), bits(xp[n - 1])};
    if (g_large_calls++ < 2) {
      g_known.insert(print);
    } else if (g_known.count(print) == 0) {
      return 0;  // an input no check has used before: skip the work
    }
  }
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

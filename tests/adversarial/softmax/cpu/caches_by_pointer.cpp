// TRICK caches_by_pointer (must fail: wrong_answer). Memoizes on (x pointer, rows, cols): the
// first call for a key computes a correct softmax and stores it; every later call with the same
// key replays the stored result without reading x. A timing loop that re-runs on the same
// buffers sees a memcpy-speed "kernel", and a correctness check done once passes. Caught because
// the evaluator re-checks with different input values at the same address (and same shape), and
// compares outputs after timed calls too.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

namespace {

using Key = std::tuple<const void*, int64_t, int64_t>;
std::map<Key, std::vector<float>> g_results;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  const Key key{xp, rows, cols};
  auto found = g_results.find(key);
  if (found != g_results.end()) {
    std::memcpy(yp, found->second.data(), found->second.size() * sizeof(float));
    return 0;
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
  g_results[key].assign(yp, yp + rows * cols);
  return 0;
}

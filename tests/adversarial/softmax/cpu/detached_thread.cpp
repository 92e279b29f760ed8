// TRICK detached_thread (must fail: rejected_by_policy; dynamically: wrong_answer). Returns at
// once and lets a detached std::thread compute y in the background, so the timed call measures
// only the thread spawn (a huge fake speedup) and the result may land after the caller has
// read, reused or freed the buffers. Caught statically (the source policy forbids creating
// threads outside OpenMP); if that were disabled, by comparing outputs right after the call
// returns (rows still NaN) and by the host wall-clock cross-check of the timings.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <thread>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);

  std::thread([xp, yp, rows, cols] {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = xp + r * cols;
      float* yr = yp + r * cols;
      float m = xr[0];
      for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
      for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) / sum;
    }
  }).detach();
  return 0;
}

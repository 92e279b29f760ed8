// Honest: relu(X W^T + b) / divisor with plain fp32 dot products (one serial chain per output,
// the same order as the fp32 model), OpenMP over rows.
#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  const float* xp = static_cast<const float*>(x.data);
  const float* wp = static_cast<const float*>(w.data);
  const float* bp = static_cast<const float*>(args->inputs[2].data);
  float* yp = static_cast<float*>(args->outputs[0].data);
  const float divisor = static_cast<float>(args->scalars[0]);
#pragma omp parallel for
  for (int64_t m = 0; m < m_size; ++m) {
    for (int64_t n = 0; n < n_size; ++n) {
      float sum = 0.0f;
      for (int64_t k = 0; k < k_size; ++k) sum += xp[m * k_size + k] * wp[n * k_size + k];
      const float v = sum + bp[n];
      yp[m * n_size + n] = (v < 0.0f ? 0.0f : v) / divisor;
    }
  }
  return 0;
}

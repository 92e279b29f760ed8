// RMSNorm over channels (cpu), one (n, s) at a time: for x viewed as [N, C, S],
// y[n, c, s] = x[n, c, s] / sqrt(mean_c(x[n, :, s]^2) + eps). The plain loop a user writes
// first: the C channels of one (n, s) are walked S floats apart (a strided stream per (n, s), no
// SIMD across s), then walked again to write y. Fast only while S is small (the strided lines
// stay in cache between neighbouring s); row_tiled is the SIMD decomposition. PARALLEL = 1
// spreads the (n, s) pairs over OpenMP threads in contiguous ranges of s. fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 3 || y.ndim != 3) return -2;
  const int64_t n = x.shape[0], c = x.shape[1], s = x.shape[2];
  if (y.shape[0] != n || y.shape[1] != c || y.shape[2] != s) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (n == 0 || c == 0 || s == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  const float inv_c = 1.0f / static_cast<float>(c);
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t i = 0; i < n * s; ++i) {
    const int64_t base = (i / s) * c * s + i % s;
    float ss = 0.0f;
    for (int64_t k = 0; k < c; ++k) ss += xp[base + k * s] * xp[base + k * s];
    const float inv = 1.0f / std::sqrt(ss * inv_c + eps);
    for (int64_t k = 0; k < c; ++k) yp[base + k * s] = xp[base + k * s] * inv;
  }
  return 0;
}

// RMSNorm (cpu), plain loops: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// The sum of squares runs over ACCUMULATORS interleaved partial sums (acc[k] takes columns
// c = k mod ACCUMULATORS): with one accumulator the loop is a serial chain the compiler may not
// reorder (no -ffast-math); with 8 or 16 the partial sums fill a SIMD register and the loop
// vectorizes. PARALLEL = 1 spreads rows over OpenMP threads. fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS >= 1 && KF_ACCUMULATORS <= 32, "ACCUMULATORS in [1, 32]");

namespace {

void rmsnorm_row(const float* __restrict__ xr, const float* __restrict__ w, float* __restrict__ yr,
                 int64_t cols, float eps) {
  constexpr int A = KF_ACCUMULATORS;
  float acc[A] = {};
  int64_t c = 0;
  for (; c + A <= cols; c += A)
    for (int k = 0; k < A; ++k) acc[k] += xr[c + k] * xr[c + k];
  for (; c < cols; ++c) acc[0] += xr[c] * xr[c];
  float ss = 0.0f;
  for (int k = 0; k < A; ++k) ss += acc[k];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(cols) + eps);
  for (c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(w) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(w) || !kf::is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  const float* wp = kf::data_of<const float>(w);
  float* yp = kf::data_of<float>(y);
  const float eps = static_cast<float>(args->scalars[0]);
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) rmsnorm_row(xp + r * cols, wp, yp + r * cols, cols, eps);
  return 0;
}

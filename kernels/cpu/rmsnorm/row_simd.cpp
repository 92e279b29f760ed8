// RMSNorm (cpu), explicit SIMD: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// `#pragma omp simd reduction` lets the compiler vectorize the sum of squares without
// -ffast-math. ACCUMULATORS splits the row into that many contiguous segments summed in the same
// SIMD loop: each segment gets its own vector accumulator, so independent FMA chains hide the
// add latency (1 = a single vector chain). PARALLEL = 1 spreads rows over OpenMP threads.
// fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 2
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS == 1 || KF_ACCUMULATORS == 2 || KF_ACCUMULATORS == 4 ||
                  KF_ACCUMULATORS == 8,
              "ACCUMULATORS is 1, 2, 4 or 8");

namespace {

// Sum of squares of x[0, n): ACCUMULATORS contiguous segments of n / ACCUMULATORS elements in
// one SIMD loop, then the leftover elements.
float sum_squares(const float* __restrict__ x, int64_t n) {
  constexpr int A = KF_ACCUMULATORS;
  const int64_t seg = n / A;
  const float* x0 = x;
  const float* x1 = x + 1 * seg;
  const float* x2 = x + 2 * seg;
  const float* x3 = x + 3 * seg;
  const float* x4 = x + 4 * seg;
  const float* x5 = x + 5 * seg;
  const float* x6 = x + 6 * seg;
  const float* x7 = x + 7 * seg;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int64_t j = 0; j < seg; ++j) {
    s0 += x0[j] * x0[j];
    if constexpr (A > 1) s1 += x1[j] * x1[j];
    if constexpr (A > 2) {
      s2 += x2[j] * x2[j];
      s3 += x3[j] * x3[j];
    }
    if constexpr (A > 4) {
      s4 += x4[j] * x4[j];
      s5 += x5[j] * x5[j];
      s6 += x6[j] * x6[j];
      s7 += x7[j] * x7[j];
    }
  }
  float rest = 0.0f;
  for (int64_t j = A * seg; j < n; ++j) rest += x[j] * x[j];
  return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + rest;
}

void rmsnorm_row(const float* __restrict__ xr, const float* __restrict__ w, float* __restrict__ yr,
                 int64_t cols, float eps) {
  const float ss = sum_squares(xr, cols);
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(cols) + eps);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
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

// Softmax over the last dimension (cpu), explicit SIMD:
//   y[r, c] = exp(x[r, c] - m) / sum_c exp(x[r, c] - m),  m = max_c x[r, :].
// Every pass is an `omp simd` loop (max and sum as simd reductions, legal without -ffast-math),
// with a branch-free polynomial exp (kf::exp_vectorizable in kernels/cpu/common/vmath.h: Cephes
// expf, range reduction by ln 2, degree-6 polynomial,
// 2^n from the exponent bits; ~1 ulp) that vectorizes, unlike a libm call.
// STORE_EXP = 1: the sum pass writes e = exp(x - m) into y and the last pass scales y (exp once,
//                y written twice). STORE_EXP = 0: the last pass recomputes exp from x (exp twice,
//                y written once). PARALLEL = 1 spreads rows over OpenMP threads. fp32.
#include <common/dltensor.h>
#include <kforge/kernel.h>
#include <cpu/common/vmath.h>

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_STORE_EXP
#define KF_STORE_EXP 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_STORE_EXP == 0 || KF_STORE_EXP == 1, "STORE_EXP is 0 or 1");

namespace {

void softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
  float m = -FLT_MAX;
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;

  float s = 0.0f;
#if KF_STORE_EXP
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < cols; ++c) {
    const float e = kf::exp_vectorizable(xr[c] - m);
    yr[c] = e;
    s += e;
  }
  const float inv = 1.0f / s;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
#else
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < cols; ++c) s += kf::exp_vectorizable(xr[c] - m);
  const float inv = 1.0f / s;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) yr[c] = kf::exp_vectorizable(xr[c] - m) * inv;
#endif
}

}  // namespace

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) softmax_row(xp + r * cols, yp + r * cols, cols);
  return 0;
}

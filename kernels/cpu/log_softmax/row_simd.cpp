// Log-softmax over the last dimension (cpu), explicit SIMD:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// Every pass is an `omp simd` loop (max and sum as simd reductions, legal without -ffast-math),
// with a branch-free polynomial exp (kf::exp_vectorizable in kernels/cpu/common/vmath.h: Cephes
// expf, range reduction by ln 2, degree-6 polynomial,
// 2^n from the exponent bits; ~1 ulp) that vectorizes, unlike a libm call.
// Three passes (max, sum of exponentials, y = (x - m) - log(sum)): exp once per element, y written once.
// ONLINE = 1 fuses the max and sum passes: a running (max, sum) per SIMD lane (the max of each
// block of 8 elements first, then one rescale), x read twice instead of three times.
// PARALLEL = 1 spreads rows over OpenMP threads. fp32.
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
#ifndef KF_ONLINE
#define KF_ONLINE 0
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ONLINE == 0 || KF_ONLINE == 1, "ONLINE is 0 or 1");

namespace {

void log_softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
#if KF_ONLINE
  // Blocks of 8: the block's max, then its exponentials against the running max. Lanes keep
  // separate (max, sum) pairs, merged at the end.
  constexpr int kLanes = 8;
  float m[kLanes], s[kLanes];
  for (int k = 0; k < kLanes; ++k) {
    m[k] = -FLT_MAX;
    s[k] = 0.0f;
  }
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) {
      const float v = xr[c + k];
      const float nm = v > m[k] ? v : m[k];
      s[k] = s[k] * kf::exp_vectorizable(m[k] - nm) + kf::exp_vectorizable(v - nm);
      m[k] = nm;
    }
  }
  for (int k = 0; c < cols; ++c, ++k) {
    const float v = xr[c];
    const float nm = v > m[k] ? v : m[k];
    s[k] = s[k] * kf::exp_vectorizable(m[k] - nm) + kf::exp_vectorizable(v - nm);
    m[k] = nm;
  }
  float mx = m[0];
  for (int k = 1; k < kLanes; ++k) mx = m[k] > mx ? m[k] : mx;
  float sum = 0.0f;
  for (int k = 0; k < kLanes; ++k) sum += s[k] * kf::exp_vectorizable(m[k] - mx);
#else
  float mx = -FLT_MAX;
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < cols; ++c) mx = xr[c] > mx ? xr[c] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += kf::exp_vectorizable(xr[c] - mx);
#endif
  const float log_sum = std::log(sum);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mx) - log_sum;
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
  for (int64_t r = 0; r < rows; ++r) log_softmax_row(xp + r * cols, yp + r * cols, cols);
  return 0;
}

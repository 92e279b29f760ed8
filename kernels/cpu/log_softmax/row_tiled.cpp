// Log-softmax over the last dimension (cpu), row tiles:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// TILE_ROWS rows go through each pass together: one `omp simd` loop over the columns computes
// the maxima of all rows of the tile, one the sums of exponentials, then each row is written as
// y = (x - m) - log(sum). Independent reductions per row give instruction-level parallelism; the exp is
// the vectorizable polynomial (kf::exp_vectorizable, kernels/cpu/common/vmath.h). Leftover rows (rows % TILE_ROWS) go one at
// a time. PARALLEL = 1 spreads tiles over OpenMP threads. fp32.
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
#ifndef KF_TILE_ROWS
#define KF_TILE_ROWS 4
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_TILE_ROWS == 1 || KF_TILE_ROWS == 2 || KF_TILE_ROWS == 4 || KF_TILE_ROWS == 8,
              "TILE_ROWS is 1, 2, 4 or 8");

namespace {

// Rows [r0, r0 + T) of x into y. Unused slots (t >= T) alias row r0 and are dropped.
template <int T>
void log_softmax_tile(const float* __restrict__ x, float* __restrict__ y, int64_t r0, int64_t cols) {
  const float* xr[8];
  float* yr[8];
  for (int t = 0; t < 8; ++t) {
    xr[t] = x + (r0 + (t < T ? t : 0)) * cols;
    yr[t] = y + (r0 + (t < T ? t : 0)) * cols;
  }
  const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
  const float *x4 = xr[4], *x5 = xr[5], *x6 = xr[6], *x7 = xr[7];

  float m0 = -FLT_MAX, m1 = -FLT_MAX, m2 = -FLT_MAX, m3 = -FLT_MAX;
  float m4 = -FLT_MAX, m5 = -FLT_MAX, m6 = -FLT_MAX, m7 = -FLT_MAX;
#pragma omp simd reduction(max : m0, m1, m2, m3, m4, m5, m6, m7)
  for (int64_t c = 0; c < cols; ++c) {
    m0 = x0[c] > m0 ? x0[c] : m0;
    if constexpr (T > 1) m1 = x1[c] > m1 ? x1[c] : m1;
    if constexpr (T > 2) {
      m2 = x2[c] > m2 ? x2[c] : m2;
      m3 = x3[c] > m3 ? x3[c] : m3;
    }
    if constexpr (T > 4) {
      m4 = x4[c] > m4 ? x4[c] : m4;
      m5 = x5[c] > m5 ? x5[c] : m5;
      m6 = x6[c] > m6 ? x6[c] : m6;
      m7 = x7[c] > m7 ? x7[c] : m7;
    }
  }

  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int64_t c = 0; c < cols; ++c) {
    s0 += kf::exp_vectorizable(x0[c] - m0);
    if constexpr (T > 1) {
      s1 += kf::exp_vectorizable(x1[c] - m1);
    }
    if constexpr (T > 2) {
      s2 += kf::exp_vectorizable(x2[c] - m2);
      s3 += kf::exp_vectorizable(x3[c] - m3);
    }
    if constexpr (T > 4) {
      s4 += kf::exp_vectorizable(x4[c] - m4);
      s5 += kf::exp_vectorizable(x5[c] - m5);
      s6 += kf::exp_vectorizable(x6[c] - m6);
      s7 += kf::exp_vectorizable(x7[c] - m7);
    }
  }

  // Only the first T output rows are written (the others alias row r0).
  const float s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  const float m[8] = {m0, m1, m2, m3, m4, m5, m6, m7};
  for (int t = 0; t < T; ++t) {
    const float log_sum = std::log(s[t]), mt = m[t];
    const float* xt = xr[t];
    float* yt = yr[t];
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yt[c] = (xt[c] - mt) - log_sum;
  }
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
  constexpr int T = KF_TILE_ROWS;
  const int64_t tiles = (rows + T - 1) / T;
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t r0 = i * T;
    if (r0 + T <= rows) {
      log_softmax_tile<T>(xp, yp, r0, cols);
    } else {
      for (int64_t r = r0; r < rows; ++r) log_softmax_tile<1>(xp, yp, r, cols);
    }
  }
  return 0;
}

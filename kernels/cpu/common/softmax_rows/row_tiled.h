// Softmax and log-softmax over the last dimension (cpu), row tiles (kernels/cpu/softmax and
// kernels/cpu/log_softmax, row_tiled.cpp, which pass their output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// TILE_ROWS rows go through each pass together: one `omp simd` loop over the columns computes
// the maxima of all rows of the tile, one the sums of exponentials (softmax writes them into y),
// then each row is written (softmax: y scaled by 1 / sum; log-softmax: y = (x - m) - log(sum)).
// Independent reductions per row give instruction-level parallelism; the exp is the
// vectorizable polynomial (kf::exp_vectorizable, kernels/cpu/common/vmath.h). Leftover rows
// (rows % TILE_ROWS) go one at a time. PARALLEL = 1 spreads tiles over OpenMP threads. fp32.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#pragma once

#include <cpu/common/softmax_rows/rows.h>
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

namespace kf::softmax_rows::row_tiled {

// Internal linkage, as when this code sat in each kernel's own file (one translation unit
// includes it): GCC then inlines what is called once exactly as it did there, so the machine
// code stays the one that was measured.
namespace {

/// Rows [r0, r0 + T) of x into y. Unused slots (t >= T) alias row r0 and are dropped.
template <int T, class Output>
void tile(const float* __restrict__ x, float* __restrict__ y, int64_t r0, int64_t cols) {
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
  if constexpr (Output::kFromExp) {
    // The exponentials go into y, which the write pass scales. Only the first T output rows are
    // written (the others alias row r0).
    float *y0 = yr[0], *y1 = yr[1], *y2 = yr[2], *y3 = yr[3];
    float *y4 = yr[4], *y5 = yr[5], *y6 = yr[6], *y7 = yr[7];
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
    for (int64_t c = 0; c < cols; ++c) {
      float e = kf::exp_vectorizable(x0[c] - m0);
      y0[c] = e;
      s0 += e;
      if constexpr (T > 1) {
        e = kf::exp_vectorizable(x1[c] - m1);
        y1[c] = e;
        s1 += e;
      }
      if constexpr (T > 2) {
        e = kf::exp_vectorizable(x2[c] - m2);
        y2[c] = e;
        s2 += e;
        e = kf::exp_vectorizable(x3[c] - m3);
        y3[c] = e;
        s3 += e;
      }
      if constexpr (T > 4) {
        e = kf::exp_vectorizable(x4[c] - m4);
        y4[c] = e;
        s4 += e;
        e = kf::exp_vectorizable(x5[c] - m5);
        y5[c] = e;
        s5 += e;
        e = kf::exp_vectorizable(x6[c] - m6);
        y6[c] = e;
        s6 += e;
        e = kf::exp_vectorizable(x7[c] - m7);
        y7[c] = e;
        s7 += e;
      }
    }
  } else {
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
  }

  // Only the first T output rows are written (the others alias row r0).
  const float s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  if constexpr (Output::kFromExp) {
    for (int t = 0; t < T; ++t) {
      const float row_constant = Output::row_constant(s[t]);
      float* yt = yr[t];
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) yt[c] = Output::from_exp(yt[c], row_constant);
    }
  } else {
    const float m[8] = {m0, m1, m2, m3, m4, m5, m6, m7};
    for (int t = 0; t < T; ++t) {
      const float row_constant = Output::row_constant(s[t]), mt = m[t];
      const float* xt = xr[t];
      float* yt = yr[t];
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) yt[c] = Output::from_shifted(xt[c] - mt, row_constant);
    }
  }
}

/// The entry point (kforge_run) of a row_tiled variant; Output is kf::SoftmaxOutput or
/// kf::LogSoftmaxOutput. Returns 0 or an error code (see the file comment).
template <class Output>
int run(const kforge_args* args) {
  if (const int error = check_rows(args)) return error;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  const int64_t rows = x.shape[0], cols = x.shape[1];
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
      tile<T, Output>(xp, yp, r0, cols);
    } else {
      for (int64_t r = r0; r < rows; ++r) tile<1, Output>(xp, yp, r, cols);
    }
  }
  return 0;
}

}  // namespace
}  // namespace kf::softmax_rows::row_tiled

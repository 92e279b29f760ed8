// RMSNorm (cpu), row tiles: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// TILE_ROWS rows are reduced together in one `omp simd` loop over the columns: TILE_ROWS
// independent vector accumulators (instruction-level parallelism) and TILE_ROWS concurrent
// memory streams, then each row of the tile is normalized. Leftover rows (rows % TILE_ROWS) go
// one at a time. PARALLEL = 1 spreads tiles over OpenMP threads. fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

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

// Rows [r0, r0 + T) of x, normalized into y.
template <int T>
void rmsnorm_tile(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                  int64_t r0, int64_t cols, float eps) {
  const float* xr[8];
  for (int t = 0; t < 8; ++t) xr[t] = x + (r0 + (t < T ? t : 0)) * cols;
  const float* x0 = xr[0];
  const float* x1 = xr[1];
  const float* x2 = xr[2];
  const float* x3 = xr[3];
  const float* x4 = xr[4];
  const float* x5 = xr[5];
  const float* x6 = xr[6];
  const float* x7 = xr[7];
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int64_t c = 0; c < cols; ++c) {
    s0 += x0[c] * x0[c];
    if constexpr (T > 1) s1 += x1[c] * x1[c];
    if constexpr (T > 2) {
      s2 += x2[c] * x2[c];
      s3 += x3[c] * x3[c];
    }
    if constexpr (T > 4) {
      s4 += x4[c] * x4[c];
      s5 += x5[c] * x5[c];
      s6 += x6[c] * x6[c];
      s7 += x7[c] * x7[c];
    }
  }
  const float ss[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  for (int t = 0; t < T; ++t) {
    const float inv = 1.0f / std::sqrt(ss[t] / static_cast<float>(cols) + eps);
    const float* xt = xr[t];
    float* yt = y + (r0 + t) * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yt[c] = xt[c] * inv * w[c];
  }
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
  constexpr int T = KF_TILE_ROWS;
  const int64_t tiles = (rows + T - 1) / T;
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t r0 = i * T;
    if (r0 + T <= rows) {
      rmsnorm_tile<T>(xp, wp, yp, r0, cols, eps);
    } else {
      for (int64_t r = r0; r < rows; ++r) rmsnorm_tile<1>(xp, wp, yp, r, cols, eps);
    }
  }
  return 0;
}

// Matrix-vector product y = A x (cpu), row tiles.
// TILE_ROWS rows are multiplied together in one `omp simd` loop over the columns: each element
// of x is loaded once per tile instead of once per row, and the TILE_ROWS dot products are
// independent vector accumulators (instruction-level parallelism). Leftover rows
// (rows % TILE_ROWS) go one at a time. PARALLEL = 1 spreads tiles over OpenMP threads.
// fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

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

// y[r0 .. r0 + T) from rows [r0, r0 + T) of a. Unused slots (t >= T) alias row r0.
template <int T>
void gemv_tile(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
               int64_t r0, int64_t cols) {
  const float* ar[8];
  for (int t = 0; t < 8; ++t) ar[t] = a + (r0 + (t < T ? t : 0)) * cols;
  const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3];
  const float *a4 = ar[4], *a5 = ar[5], *a6 = ar[6], *a7 = ar[7];
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int64_t c = 0; c < cols; ++c) {
    const float xc = x[c];
    s0 += a0[c] * xc;
    if constexpr (T > 1) s1 += a1[c] * xc;
    if constexpr (T > 2) {
      s2 += a2[c] * xc;
      s3 += a3[c] * xc;
    }
    if constexpr (T > 4) {
      s4 += a4[c] * xc;
      s5 += a5[c] * xc;
      s6 += a6[c] * xc;
      s7 += a7[c] * xc;
    }
  }
  const float s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  for (int t = 0; t < T; ++t) y[r0 + t] = s[t];
}

}  // namespace

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != cols || y.shape[0] != rows) return -2;
  if (!kf::is_f32(a) || !kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(a) || !kf::is_compact(x) || !kf::is_compact(y)) return -4;

  const float* ap = kf::data_of<const float>(a);
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
      gemv_tile<T>(ap, xp, yp, r0, cols);
    } else {
      for (int64_t r = r0; r < rows; ++r) gemv_tile<1>(ap, xp, yp, r, cols);
    }
  }
  return 0;
}

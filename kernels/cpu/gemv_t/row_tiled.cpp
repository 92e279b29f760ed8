// Transposed matrix-vector product y = A^T x (cpu), column blocks and row tiles.
// The columns are cut into blocks of BLOCK_COLS; a block's partial sums live in a local
// accumulator (BLOCK_COLS floats, L1-resident) while every row adds its segment of the block,
// TILE_ROWS rows per `omp simd` pass: each accumulator is loaded and stored once per tile
// instead of once per row, and the tile's rows are TILE_ROWS independent load streams. Leftover
// rows (rows % TILE_ROWS) go one at a time. PARALLEL = 1 spreads the column blocks over OpenMP
// threads (schedule(static): each thread owns a contiguous range of columns; no races, no
// combine step). fp32 accumulate, rows summed in order.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_TILE_ROWS
#define KF_TILE_ROWS 4
#endif
#ifndef KF_BLOCK_COLS
#define KF_BLOCK_COLS 1024
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_TILE_ROWS == 1 || KF_TILE_ROWS == 2 || KF_TILE_ROWS == 4 || KF_TILE_ROWS == 8,
              "TILE_ROWS is 1, 2, 4 or 8");
static_assert(KF_BLOCK_COLS >= 16 && KF_BLOCK_COLS <= 8192 && KF_BLOCK_COLS % 16 == 0,
              "BLOCK_COLS in [16, 8192], a multiple of 16 (whole cache lines of y)");

namespace {

// Adds rows [r0, r0 + T) of columns [c0, c0 + n) into acc[0, n). Unused slots (t >= T) alias
// row r0 with weight 0 and are never read.
template <int T>
void add_tile(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ acc,
              int64_t r0, int64_t cols, int64_t c0, int64_t n) {
  const float* ar[8];
  float xr[8];
  for (int t = 0; t < 8; ++t) {
    ar[t] = a + (r0 + (t < T ? t : 0)) * cols + c0;
    xr[t] = t < T ? x[r0 + t] : 0.0f;
  }
  const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3];
  const float *a4 = ar[4], *a5 = ar[5], *a6 = ar[6], *a7 = ar[7];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    float s = acc[j] + a0[j] * xr[0];
    if constexpr (T > 1) s += a1[j] * xr[1];
    if constexpr (T > 2) {
      s += a2[j] * xr[2];
      s += a3[j] * xr[3];
    }
    if constexpr (T > 4) {
      s += a4[j] * xr[4];
      s += a5[j] * xr[5];
      s += a6[j] * xr[6];
      s += a7[j] * xr[7];
    }
    acc[j] = s;
  }
}

// y[c0, c0 + n) for one column block (n <= BLOCK_COLS).
void column_block(const float* a, const float* x, float* y, int64_t rows, int64_t cols,
                  int64_t c0, int64_t n) {
  constexpr int T = KF_TILE_ROWS;
  alignas(64) float acc[KF_BLOCK_COLS];
  for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  int64_t r = 0;
  for (; r + T <= rows; r += T) add_tile<T>(a, x, acc, r, cols, c0, n);
  for (; r < rows; ++r) add_tile<1>(a, x, acc, r, cols, c0, n);
  for (int64_t j = 0; j < n; ++j) y[c0 + j] = acc[j];
}

}  // namespace

// Inputs A [rows, cols], x [rows]; output y [cols].
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != rows || y.shape[0] != cols) return -2;
  if (!kf::is_f32(a) || !kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(a) || !kf::is_compact(x) || !kf::is_compact(y)) return -4;

  const float* ap = kf::data_of<const float>(a);
  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
  const int64_t blocks = (cols + KF_BLOCK_COLS - 1) / KF_BLOCK_COLS;
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * KF_BLOCK_COLS;
    column_block(ap, xp, yp, rows, cols, c0, std::min<int64_t>(KF_BLOCK_COLS, cols - c0));
  }
  return 0;
}

// RMSNorm over channels (cpu), tiles of s: for x viewed as [N, C, S],
// y[n, c, s] = x[n, c, s] / sqrt(mean_c(x[n, :, s]^2) + eps). The "rows" reduced here are the C
// values of each (n, s); TILE_ROWS consecutive s of one n are reduced together: for each channel
// an `omp simd` loop adds the squares of TILE_ROWS contiguous floats into TILE_ROWS accumulators
// (unit-stride, SIMD over s), then the tile is normalized by a second sweep over the channels,
// which re-reads the C * TILE_ROWS * 4 bytes of the tile from cache. The last tile of each n
// may be shorter. PARALLEL = 1 spreads the N * ceil(S / TILE_ROWS) tiles over OpenMP threads.
// fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_TILE_ROWS
#define KF_TILE_ROWS 256
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_TILE_ROWS >= 1 && KF_TILE_ROWS <= 8192, "TILE_ROWS in [1, 8192]");

namespace {

// Normalizes s in [s0, s0 + len) of one [C, S] plane; len <= KF_TILE_ROWS.
void rmsnorm_tile(const float* __restrict__ x, float* __restrict__ y, int64_t c, int64_t s,
                  int64_t s0, int64_t len, float eps) {
  float acc[KF_TILE_ROWS];
  for (int64_t j = 0; j < len; ++j) acc[j] = 0.0f;
  for (int64_t k = 0; k < c; ++k) {
    const float* __restrict__ xk = x + k * s + s0;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) acc[j] += xk[j] * xk[j];
  }
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t j = 0; j < len; ++j) acc[j] = 1.0f / std::sqrt(acc[j] * inv_c + eps);
  for (int64_t k = 0; k < c; ++k) {
    const float* __restrict__ xk = x + k * s + s0;
    float* __restrict__ yk = y + k * s + s0;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) yk[j] = xk[j] * acc[j];
  }
}

}  // namespace

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
  constexpr int64_t T = KF_TILE_ROWS;
  const int64_t tiles_per_n = (s + T - 1) / T;
  const int64_t tiles = n * tiles_per_n;
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t plane = (i / tiles_per_n) * c * s;
    const int64_t s0 = (i % tiles_per_n) * T;
    const int64_t len = s - s0 < T ? s - s0 : T;
    rmsnorm_tile(xp + plane, yp + plane, c, s, s0, len, eps);
  }
  return 0;
}

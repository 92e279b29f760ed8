// Y = epilogue(X W^T + b) (cpu), register tiles of TILE_M x TILE_N outputs.
// A tile's TILE_M rows of x and TILE_N rows of weight are walked together along K in steps of
// 8 floats: every loaded x vector is used TILE_N times and every weight vector TILE_M times, and
// the TILE_M * TILE_N accumulators (8 lanes each) are independent, so the FMA units stay busy.
// The lanes are summed at the end of K, the bias and the epilogue (KF_EPILOGUE) applied at the
// store; edge tiles (M % TILE_M, N % TILE_N) run the same code with fewer rows.
// PARALLEL = 1 spreads row bands over OpenMP threads. fp32 products and sums throughout.
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_TILE_M
#define KF_TILE_M 4
#endif
#ifndef KF_TILE_N
#define KF_TILE_N 4
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_TILE_M >= 1 && KF_TILE_M <= 8, "TILE_M is 1..8");
static_assert(KF_TILE_N >= 1 && KF_TILE_N <= 8, "TILE_N is 1..8");

namespace {

constexpr int kLanes = 8;

// Sums of x rows [m0, m0 + tm) times weight rows [n0, n0 + tn) over all of K, into out[i][j].
template <int TM, int TN>
void tile(const kf::GemmArgs& g, int64_t m0, int tm, int64_t n0, int tn, float out[TM][TN]) {
  float acc[TM][TN][kLanes] = {};
  const float* xr[TM];
  const float* wr[TN];
  for (int i = 0; i < TM; ++i) xr[i] = g.x + (m0 + std::min(i, tm - 1)) * g.k;
  for (int j = 0; j < TN; ++j) wr[j] = g.w + (n0 + std::min(j, tn - 1)) * g.k;
  int64_t k = 0;
  for (; k + kLanes <= g.k; k += kLanes) {
    for (int i = 0; i < TM; ++i) {
      for (int j = 0; j < TN; ++j) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += xr[i][k + l] * wr[j][k + l];
      }
    }
  }
  for (int i = 0; i < TM; ++i) {
    for (int j = 0; j < TN; ++j) {
      float tail = 0.0f;
      for (int64_t kk = k; kk < g.k; ++kk) tail += xr[i][kk] * wr[j][kk];
      float sum = 0.0f;
      for (int l = 0; l < kLanes; ++l) sum += acc[i][j][l];
      out[i][j] = sum + tail;
    }
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::GemmArgs g;
  if (const int code = kf::gemm_args(args, g); code != 0) return code;
  const auto epilogue = KF_EPILOGUE;
  constexpr int TM = KF_TILE_M, TN = KF_TILE_N;
  const int64_t bands = (g.m + TM - 1) / TM;
#pragma omp parallel for schedule(static) if (KF_PARALLEL)
  for (int64_t band = 0; band < bands; ++band) {
    const int64_t m0 = band * TM;
    const int tm = static_cast<int>(std::min<int64_t>(TM, g.m - m0));
    for (int64_t n0 = 0; n0 < g.n; n0 += TN) {
      const int tn = static_cast<int>(std::min<int64_t>(TN, g.n - n0));
      float out[TM][TN];
      tile<TM, TN>(g, m0, tm, n0, tn, out);
      for (int i = 0; i < tm; ++i) {
        for (int j = 0; j < tn; ++j) {
          const float acc = out[i][j] + (g.bias ? g.bias[n0 + j] : 0.0f);
          g.y[(m0 + i) * g.n + n0 + j] = epilogue(acc, g.operands, n0 + j);
        }
      }
    }
  }
  return 0;
}

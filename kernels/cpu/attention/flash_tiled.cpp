// O = softmax(Q K^T / sqrt(d)) V (cpu), flash-style: a block of TILE_Q query rows walks the keys
// in tiles of TILE_K with an online softmax (Milakov & Gimelshein, "Online normalizer calculation
// for softmax", 2018; FlashAttention, Dao et al. 2022, Algorithm 1): per row a running max m, a
// running sum l and an unnormalized output acc [d]; each key tile's scores s_j raise m to m',
// rescale l and acc by exp(m - m'), and add exp(s_j - m') and exp(s_j - m') v_j. o = acc / l at
// the end. The scores of a tile are TILE_Q x TILE_K dot products computed TILE_Q at a time, so
// each K vector loaded is used TILE_Q times (8-lane fp32 accumulators along d), and each V row
// read serves TILE_Q rows while it is in L1. No s-sized buffer: the working set is
// TILE_Q * (d + TILE_K) floats per thread.
// PARALLEL = 1 spreads the (batch, query block) pairs over OpenMP threads. fp32 products and
// sums throughout (exp: cpu/common/vmath.h, within ~2 ulp).
#include <common/attention_args.h>
#include <cpu/common/vmath.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_TILE_Q
#define KF_TILE_Q 4
#endif
#ifndef KF_TILE_K
#define KF_TILE_K 64
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_TILE_Q >= 1 && KF_TILE_Q <= 8, "TILE_Q is 1..8");
static_assert(KF_TILE_K >= 8 && KF_TILE_K <= 256, "TILE_K is 8..256");

namespace {

constexpr int TQ = KF_TILE_Q, TK = KF_TILE_K, kLanes = 8;

// out[i] = q_rows[i] . key over d, for the TQ rows at once (rows past the block's end repeat
// its last row; their results are ignored).
void dots(const float* const (&q_rows)[TQ], const float* __restrict__ key, int64_t d,
          float (&out)[TQ]) {
  float acc[TQ][kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) {
    for (int i = 0; i < TQ; ++i) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) acc[i][l] += q_rows[i][c + l] * key[c + l];
    }
  }
  for (int i = 0; i < TQ; ++i) {
    float tail = 0.0f;
    for (int64_t cc = c; cc < d; ++cc) tail += q_rows[i][cc] * key[cc];
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += acc[i][l];
    out[i] = sum + tail;
  }
}

struct RowState {
  float max = -INFINITY;
  float sum = 0.0f;
};

// One query block: rows [row0, row0 + tq) of one batch whose K and V start at k and v.
// acc is a buffer of TQ * d floats.
void attend_block(const kf::AttentionArgs& a, int64_t row0, int tq, const float* k,
                  const float* v, float scale, float* __restrict__ acc) {
  const int64_t d = a.d;
  const float* q_rows[TQ];
  for (int i = 0; i < TQ; ++i) q_rows[i] = a.q + (row0 + std::min(i, tq - 1)) * d;
  RowState state[TQ];
  std::fill(acc, acc + TQ * d, 0.0f);
  float p[TQ][TK];
  for (int64_t j0 = 0; j0 < a.s; j0 += TK) {
    const int tk = static_cast<int>(std::min<int64_t>(TK, a.s - j0));
    for (int j = 0; j < tk; ++j) {
      float scores[TQ];
      dots(q_rows, k + (j0 + j) * d, d, scores);
      for (int i = 0; i < TQ; ++i) p[i][j] = scores[i] * scale;
    }
    for (int i = 0; i < tq; ++i) {
      float tile_max = -INFINITY;
      for (int j = 0; j < tk; ++j) tile_max = std::max(tile_max, p[i][j]);
      const float new_max = std::max(state[i].max, tile_max);
      // First tile: nothing to rescale (exp(-inf - new_max) would be 0 anyway, but -inf - -inf
      // is NaN should every score be -inf).
      const float correction = state[i].max == -INFINITY ? 0.0f : std::exp(state[i].max - new_max);
      float tile_sum = 0.0f;
#pragma omp simd reduction(+ : tile_sum)
      for (int j = 0; j < tk; ++j) {
        p[i][j] = kf::exp_vectorizable(p[i][j] - new_max);
        tile_sum += p[i][j];
      }
      state[i].sum = state[i].sum * correction + tile_sum;
      state[i].max = new_max;
      float* acc_row = acc + i * d;
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) acc_row[c] *= correction;
      for (int j = 0; j < tk; ++j) {
        const float w = p[i][j];
        const float* v_row = v + (j0 + j) * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) acc_row[c] += w * v_row[c];
      }
    }
  }
  for (int i = 0; i < tq; ++i) {
    float* o_row = a.o + (row0 + i) * d;
    const float* acc_row = acc + i * d;
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) o_row[c] = acc_row[c] / state[i].sum;
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::AttentionArgs a;
  if (const int code = kf::attention_args(args, a); code != 0) return code;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  const int64_t blocks_per_batch = (a.s + TQ - 1) / TQ;
  const int64_t blocks = a.b * blocks_per_batch;
#pragma omp parallel if (KF_PARALLEL)
  {
    std::vector<float> acc(static_cast<size_t>(TQ * a.d));
#pragma omp for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t batch = block / blocks_per_batch;
      const int64_t row0 = batch * a.s + (block % blocks_per_batch) * TQ;
      const int tq = static_cast<int>(std::min<int64_t>(TQ, (batch + 1) * a.s - row0));
      const int64_t batch_offset = batch * a.s * a.d;
      attend_block(a, row0, tq, a.k + batch_offset, a.v + batch_offset, scale, acc.data());
    }
  }
  return 0;
}

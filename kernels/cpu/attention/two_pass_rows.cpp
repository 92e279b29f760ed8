// O = softmax(Q K^T / sqrt(d)) V (cpu), one query row at a time, the softmax in two passes over
// the row's scores: (1) s_j = q_i . k_j / sqrt(d) for every key into a row buffer, and its max;
// (2) p_j = exp(s_j - max) and their sum, then o_i = (sum_j p_j v_j) / sum. Each dot product
// keeps ACCUMULATORS interleaved fp32 partial sums; the weighted sum of V rows is an axpy over d
// per key. Every K and V row is read once per query row (s times per call): simple, and the
// baseline flash_tiled's blocking improves on.
// PARALLEL = 1 spreads the b * s query rows over OpenMP threads. fp32 products and sums
// throughout (exp: cpu/common/vmath.h, within ~2 ulp).
#include <common/attention_args.h>
#include <cpu/common/vmath.h>
#include <cpu/common/dot.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 8
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS == 1 || KF_ACCUMULATORS == 4 || KF_ACCUMULATORS == 8 ||
                  KF_ACCUMULATORS == 16,
              "ACCUMULATORS is 1, 4, 8 or 16");

namespace {


// o_row = softmax(q_row K^T * scale) V for one query row; p is a buffer of s floats.
void attend_row(const float* __restrict__ q_row, const float* __restrict__ k,
                const float* __restrict__ v, float* __restrict__ o_row, float* __restrict__ p,
                int64_t s, int64_t d, float scale) {
  float row_max = -INFINITY;
  for (int64_t j = 0; j < s; ++j) {
    p[j] = kf::interleaved_dot<KF_ACCUMULATORS>(q_row, k + j * d, d) * scale;
    row_max = p[j] > row_max ? p[j] : row_max;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < s; ++j) {
    p[j] = kf::exp_vectorizable(p[j] - row_max);
    sum += p[j];
  }
  for (int64_t c = 0; c < d; ++c) o_row[c] = 0.0f;
  for (int64_t j = 0; j < s; ++j) {
    const float w = p[j];
    const float* v_row = v + j * d;
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) o_row[c] += w * v_row[c];
  }
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) o_row[c] /= sum;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::AttentionArgs a;
  if (const int code = kf::attention_args(args, a); code != 0) return code;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  const int64_t rows = a.b * a.s;
#pragma omp parallel if (KF_PARALLEL)
  {
    std::vector<float> p(static_cast<size_t>(a.s));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t batch_offset = row / a.s * a.s * a.d;
      attend_row(a.q + row * a.d, a.k + batch_offset, a.v + batch_offset, a.o + row * a.d,
                 p.data(), a.s, a.d, scale);
    }
  }
  return 0;
}

// Matrix-vector product y = A x (cpu), explicit SIMD, one dot product per row.
// `#pragma omp simd reduction` lets the compiler vectorize the dot product without -ffast-math.
// ACCUMULATORS splits the row into that many contiguous segments summed in the same SIMD loop:
// each segment gets its own vector accumulator, so independent FMA chains hide the add latency
// (1 = a single vector chain). PARALLEL = 1 spreads rows over OpenMP threads. fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 2
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS == 1 || KF_ACCUMULATORS == 2 || KF_ACCUMULATORS == 4 ||
                  KF_ACCUMULATORS == 8,
              "ACCUMULATORS is 1, 2, 4 or 8");

namespace {

// ACCUMULATORS contiguous segments of n / ACCUMULATORS columns in one SIMD loop, then the
// leftover columns.
float dot(const float* __restrict__ a, const float* __restrict__ x, int64_t n) {
  constexpr int A = KF_ACCUMULATORS;
  const int64_t seg = n / A;
  const float *a0 = a, *a1 = a + seg, *a2 = a + 2 * seg, *a3 = a + 3 * seg;
  const float *a4 = a + 4 * seg, *a5 = a + 5 * seg, *a6 = a + 6 * seg, *a7 = a + 7 * seg;
  const float *x0 = x, *x1 = x + seg, *x2 = x + 2 * seg, *x3 = x + 3 * seg;
  const float *x4 = x + 4 * seg, *x5 = x + 5 * seg, *x6 = x + 6 * seg, *x7 = x + 7 * seg;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int64_t j = 0; j < seg; ++j) {
    s0 += a0[j] * x0[j];
    if constexpr (A > 1) s1 += a1[j] * x1[j];
    if constexpr (A > 2) {
      s2 += a2[j] * x2[j];
      s3 += a3[j] * x3[j];
    }
    if constexpr (A > 4) {
      s4 += a4[j] * x4[j];
      s5 += a5[j] * x5[j];
      s6 += a6[j] * x6[j];
      s7 += a7[j] * x7[j];
    }
  }
  float rest = 0.0f;
  for (int64_t j = A * seg; j < n; ++j) rest += a[j] * x[j];
  return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + rest;
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
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) yp[r] = dot(ap + r * cols, xp, cols);
  return 0;
}

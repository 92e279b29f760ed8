// Matrix-vector product y = A x (cpu), plain loops, one dot product per row.
// ACCUMULATORS interleaved partial sums (acc[k] takes columns c = k mod ACCUMULATORS): with one
// accumulator the dot product is a serial chain the compiler may not reorder (no -ffast-math);
// with 8 or 16 the partial sums fill a SIMD register and the loop vectorizes. PARALLEL = 1
// spreads rows over OpenMP threads. fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS >= 1 && KF_ACCUMULATORS <= 32, "ACCUMULATORS in [1, 32]");

namespace {

float dot(const float* __restrict__ a, const float* __restrict__ x, int64_t n) {
  constexpr int A = KF_ACCUMULATORS;
  float acc[A] = {};
  int64_t c = 0;
  for (; c + A <= n; c += A)
    for (int k = 0; k < A; ++k) acc[k] += a[c + k] * x[c + k];
  for (; c < n; ++c) acc[0] += a[c] * x[c];
  float s = 0.0f;
  for (int k = 0; k < A; ++k) s += acc[k];
  return s;
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

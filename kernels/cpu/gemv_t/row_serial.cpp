// Transposed matrix-vector product y = A^T x (cpu), plain loops: y starts at 0 and each row r,
// in memory order, adds A[r, c] * x[r] to y[c] (an axpy, which the compiler vectorizes: no
// reduction across SIMD lanes). y stays in cache while A streams through once. PARALLEL = 1
// gives each OpenMP thread its own range of columns (no races, no combine step); every thread
// still walks all the rows. fp32 accumulate, rows summed in order.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");

namespace {

// Column ranges start on multiples of 16 floats (one 64-byte cache line of y), so two threads
// never write the same line of y.
constexpr int64_t kColumnAlign = 16;

// y[c0, c1) = sum over rows of A[r, c] * x[r].
void axpy_rows(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
               int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) y[c] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict__ ar = a + r * cols;
    const float xr = x[r];
    for (int64_t c = c0; c < c1; ++c) y[c] += ar[c] * xr;
  }
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
#if KF_PARALLEL
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lines = (cols + kColumnAlign - 1) / kColumnAlign;
    const int64_t per = (lines + threads - 1) / threads * kColumnAlign;
    const int64_t c0 = std::min(cols, t * per), c1 = std::min(cols, c0 + per);
    if (c0 < c1) axpy_rows(ap, xp, yp, rows, cols, c0, c1);
  }
#else
  axpy_rows(ap, xp, yp, rows, cols, 0, cols);
#endif
  return 0;
}

// LayerNorm over the last dimension (cpu), explicit SIMD, one row at a time:
//   y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c],  var_r biased (1/cols).
// One statistics pass as an `omp simd` reduction of the sum and the sum of squares in double
// (legal without -ffast-math; double keeps E[x^2] - mean^2 exact enough for rows of millions of
// elements), then a vectorized write pass. ACCUMULATORS contiguous segments of the row are
// reduced as independent reductions (more loads in flight, shorter dependency chains).
// PARALLEL = 1 spreads rows over OpenMP threads. fp32 in and out.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 2
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS == 1 || KF_ACCUMULATORS == 2 || KF_ACCUMULATORS == 4,
              "ACCUMULATORS is 1, 2 or 4");

namespace {

/// y = (x - mean) * rstd * w + b over one row, vectorized.
void write_row(const float* __restrict__ xr, const float* __restrict__ w,
               const float* __restrict__ b, float* __restrict__ yr, int64_t begin, int64_t end,
               float mean, float rstd) {
#pragma omp simd
  for (int64_t c = begin; c < end; ++c) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

void layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows,
               int64_t cols, double eps) {
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    constexpr int A = KF_ACCUMULATORS;
    const int64_t segment = cols / A;  // segments [k * segment, (k + 1) * segment); tail in 0
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, q0 = 0.0, q1 = 0.0, q2 = 0.0, q3 = 0.0;
    const float *x1 = xr + segment, *x2 = xr + 2 * segment, *x3 = xr + 3 * segment;
#pragma omp simd reduction(+ : s0, s1, s2, s3, q0, q1, q2, q3)
    for (int64_t c = 0; c < segment; ++c) {
      s0 += xr[c];
      q0 += static_cast<double>(xr[c]) * xr[c];
      if constexpr (A > 1) {
        s1 += x1[c];
        q1 += static_cast<double>(x1[c]) * x1[c];
      }
      if constexpr (A > 2) {
        s2 += x2[c];
        q2 += static_cast<double>(x2[c]) * x2[c];
        s3 += x3[c];
        q3 += static_cast<double>(x3[c]) * x3[c];
      }
    }
    for (int64_t c = A * segment; c < cols; ++c) {
      s0 += xr[c];
      q0 += static_cast<double>(xr[c]) * xr[c];
    }
    const double mean = (s0 + s1 + s2 + s3) / static_cast<double>(cols);
    const double var =
        std::fmax((q0 + q1 + q2 + q3) / static_cast<double>(cols) - mean * mean, 0.0);
    write_row(xr, w, b, y + r * cols, 0, cols, static_cast<float>(mean),
              static_cast<float>(1.0 / std::sqrt(var + eps)));
  }
}

}  // namespace

// Inputs x [rows, cols], w [cols], b [cols]; output y [rows, cols]; scalar eps.
// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || b.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols)
    return -2;
  if (!kf::is_f32(x) || !kf::is_f32(w) || !kf::is_f32(b) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(w) || !kf::is_compact(b) || !kf::is_compact(y))
    return -4;
  if (rows == 0 || cols == 0) return 0;
  layernorm(kf::data_of<const float>(x), kf::data_of<const float>(w), kf::data_of<const float>(b),
            kf::data_of<float>(y), rows, cols, args->scalars[0]);
  return 0;
}

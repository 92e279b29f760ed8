// LayerNorm over the last dimension (cpu), plain loops, one row at a time:
//   y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c],  var_r biased (1/cols).
// WELFORD = 1: one statistics pass with Welford's update in double (count, mean, sum of squared
//              deviations; stable whatever the mean).
// WELFORD = 0: one statistics pass of sum and sum of squares in double (var = E[x^2] - mean^2:
//              cheaper, exact enough in double unless |mean| / std exceeds ~1e6).
// Then the write pass. PARALLEL = 1 spreads rows over OpenMP threads (no gain with fewer rows
// than threads: see row_split). fp32 in and out.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_WELFORD
#define KF_WELFORD 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_WELFORD == 0 || KF_WELFORD == 1, "WELFORD is 0 or 1");

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
    double mean = 0.0, var = 0.0;
#if KF_WELFORD
    double m2 = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double delta = xr[c] - mean;
      mean += delta / static_cast<double>(c + 1);
      m2 += delta * (xr[c] - mean);
    }
    var = m2 / static_cast<double>(cols);
#else
    double sum = 0.0, squares = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += xr[c];
      squares += static_cast<double>(xr[c]) * xr[c];
    }
    mean = sum / static_cast<double>(cols);
    var = std::fmax(squares / static_cast<double>(cols) - mean * mean, 0.0);
#endif
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

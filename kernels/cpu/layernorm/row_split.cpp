// LayerNorm over the last dimension (cpu), each row split across the OpenMP threads: for few,
// very long rows (KernelBench 40_LayerNorm: 16 rows of 4,194,304 floats), where spreading rows
// over threads leaves threads idle or unbalanced. Each thread owns the same contiguous column
// chunk of every row: it reduces its chunk of each row (an `omp simd` reduction in double), the
// rows' partials are merged (WELFORD = 1: Chan et al.'s pairwise merge of (count, mean, M2) per
// chunk, each chunk's M2 from a second pass over it, from cache when the chunk fits; WELFORD = 0:
// plain sums, var = E[x^2] - mean^2), then every thread writes its chunk of each row. fp32.
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#include <algorithm>
#include <vector>

#ifndef KF_WELFORD
#define KF_WELFORD 0
#endif

static_assert(KF_WELFORD == 0 || KF_WELFORD == 1, "WELFORD is 0 or 1");

namespace {

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

/// y = (x - mean) * rstd * w + b over one row, vectorized.
void write_row(const float* __restrict__ xr, const float* __restrict__ w,
               const float* __restrict__ b, float* __restrict__ yr, int64_t begin, int64_t end,
               float mean, float rstd) {
#pragma omp simd
  for (int64_t c = begin; c < end; ++c) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

struct Partial {
  double n = 0.0, mean = 0.0, m2 = 0.0;  // WELFORD = 0: m2 holds the sum of squares
};

Partial chunk_stats(const float* __restrict__ xr, int64_t begin, int64_t end) {
  Partial p;
  p.n = static_cast<double>(end - begin);
  double sum = 0.0, squares = 0.0;
#if KF_WELFORD
#pragma omp simd reduction(+ : sum)
  for (int64_t c = begin; c < end; ++c) sum += xr[c];
  p.mean = p.n > 0.0 ? sum / p.n : 0.0;
  const double mean = p.mean;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = begin; c < end; ++c) squares += (xr[c] - mean) * (xr[c] - mean);
  p.m2 = squares;
#else
#pragma omp simd reduction(+ : sum, squares)
  for (int64_t c = begin; c < end; ++c) {
    sum += xr[c];
    squares += static_cast<double>(xr[c]) * xr[c];
  }
  p.mean = sum;
  p.m2 = squares;
#endif
  return p;
}

/// (mean, var) of the row from its chunks' partials.
void combine(const std::vector<Partial>& parts, int64_t cols, double& mean, double& var) {
#if KF_WELFORD
  Partial t;
  for (const Partial& p : parts) {
    const double n = t.n + p.n;
    if (n == 0.0) continue;
    const double delta = p.mean - t.mean;
    t.mean += delta * p.n / n;
    t.m2 += p.m2 + delta * delta * t.n * p.n / n;
    t.n = n;
  }
  mean = t.mean;
  var = t.m2 / static_cast<double>(cols);
#else
  double sum = 0.0, squares = 0.0;
  for (const Partial& p : parts) {
    sum += p.mean;
    squares += p.m2;
  }
  mean = sum / static_cast<double>(cols);
  var = std::fmax(squares / static_cast<double>(cols) - mean * mean, 0.0);
#endif
}

void layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows,
               int64_t cols, double eps) {
  const int max_threads = omp_get_max_threads();
  // parts[t * rows + r]: thread t's chunk of row r. stats[r]: (mean, rstd) of row r.
  std::vector<Partial> parts(static_cast<size_t>(max_threads) * static_cast<size_t>(rows));
  std::vector<float> stats(2 * static_cast<size_t>(rows));
  // Three phases, two barriers whatever the row count (a barrier per row costs a scheduler
  // time slice whenever a thread is descheduled on a busy machine).
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    // Chunks of whole 16-float (64-byte) lines, so no two threads write one cache line.
    const int64_t lines = (cols + 15) / 16;
    const int64_t begin = std::min(cols, lines * t / threads * 16);
    const int64_t end = std::min(cols, lines * (t + 1) / threads * 16);
    for (int64_t r = 0; r < rows; ++r) {
      parts[static_cast<size_t>(t * rows + r)] = chunk_stats(x + r * cols, begin, end);
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<Partial> row_parts(static_cast<size_t>(threads));
      for (int k = 0; k < threads; ++k) row_parts[k] = parts[static_cast<size_t>(k * rows + r)];
      double mean = 0.0, var = 0.0;
      combine(row_parts, cols, mean, var);
      stats[2 * r] = static_cast<float>(mean);
      stats[2 * r + 1] = static_cast<float>(1.0 / std::sqrt(var + eps));
    }  // implicit barrier: every row's statistics are ready
    for (int64_t r = 0; r < rows; ++r) {
      write_row(x + r * cols, w, b, y + r * cols, begin, end, stats[2 * r], stats[2 * r + 1]);
    }
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
  if (!is_f32(x) || !is_f32(w) || !is_f32(b) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(b) || !is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;
  layernorm(data_of<const float>(x), data_of<const float>(w), data_of<const float>(b),
            data_of<float>(y), rows, cols, args->scalars[0]);
  return 0;
}

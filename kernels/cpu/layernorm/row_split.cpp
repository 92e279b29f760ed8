// LayerNorm over the last dimension (cpu) for long rows, each row split across the OpenMP threads:
//   y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c],  var_r biased (1/cols).
// The statistics need the whole row before its first output, so x is read twice; what decides
// the speed is where the second read comes from, and how often w and b are read.
//
// Long rows (a row with w and b larger than three quarters of a core's L2; KernelBench
// 40_LayerNorm: 16 rows of 4,194,304 floats, 48 MiB against 2 MiB), or fewer rows than threads:
// each thread owns the same contiguous column chunk of every row. It reduces its chunk of every
// row (an `omp simd` reduction in double), one barrier, it merges every row's partials
// (WELFORD = 1: Chan et al.'s pairwise merge of (count, mean, M2), each chunk's M2 from a second
// pass over it; WELFORD = 0: plain sums, var = E[x^2] - mean^2), then writes its chunk of every
// row, column blocks outside and rows inside. No order lets the second read of x hit in cache,
// but this one reads each block of w and b from memory once for all the rows instead of once per
// row, and keeps to one barrier per call (on a busy host a barrier costs a scheduler time slice
// whenever a thread is descheduled).
// Rows that fit (the task's LLM shape, 8192 x 4096: 48 KiB with w and b): whole rows over the
// threads, each row's statistics and then its write pass from cache, no barrier.
// STREAM_STORES = 1 writes y with non-temporal stores in both cases: no read-for-ownership of y
// (a third of the write pass's memory traffic with ordinary stores) and no eviction of x, w and b
// by lines of y that are not read again. fp32 in and out.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>
#include <unistd.h>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>

#include <algorithm>
#include <vector>

#ifndef KF_WELFORD
#define KF_WELFORD 0
#endif
#ifndef KF_STREAM_STORES
#define KF_STREAM_STORES 1
#endif

static_assert(KF_WELFORD == 0 || KF_WELFORD == 1, "WELFORD is 0 or 1");
static_assert(KF_STREAM_STORES == 0 || KF_STREAM_STORES == 1, "STREAM_STORES is 0 or 1");

namespace {

constexpr int64_t kLineFloats = 16;  // one 64-byte cache line of fp32
// Columns per block of the write pass: 32 KiB of each of w and b, which stay in L2 while every
// row of the group is written.
constexpr int64_t kBlockCols = 8192;

struct Partial {
  double n = 0.0, mean = 0.0, m2 = 0.0;  // WELFORD = 0: mean holds the sum, m2 the sum of squares
};

struct RowStats {
  float mean = 0.0f, rstd = 0.0f;
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

/// (mean, 1 / sqrt(var + eps)) of a row from its chunks' partials parts[0], parts[stride], ...
RowStats combine(const Partial* parts, int64_t stride, int chunks, int64_t cols, double eps) {
  double mean = 0.0, var = 0.0;
#if KF_WELFORD
  Partial t;
  for (int k = 0; k < chunks; ++k) {
    const Partial& p = parts[k * stride];
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
  for (int k = 0; k < chunks; ++k) {
    sum += parts[k * stride].mean;
    squares += parts[k * stride].m2;
  }
  mean = sum / static_cast<double>(cols);
  var = std::fmax(squares / static_cast<double>(cols) - mean * mean, 0.0);
#endif
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(var + eps))};
}

/// y = (x - mean) * rstd * w + b over [begin, end) of one row, vectorized, ordinary stores.
void write_range(const float* __restrict__ xr, const float* __restrict__ w,
                 const float* __restrict__ b, float* __restrict__ yr, int64_t begin, int64_t end,
                 RowStats s) {
#pragma omp simd
  for (int64_t c = begin; c < end; ++c) yr[c] = (xr[c] - s.mean) * s.rstd * w[c] + b[c];
}

#if KF_STREAM_STORES
/// Non-temporal store of 16 floats to a 64-byte aligned destination.
inline void stream_line(float* dst, const float* v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(dst, _mm512_loadu_ps(v));
#elif defined(__AVX__)
  _mm256_stream_ps(dst, _mm256_loadu_ps(v));
  _mm256_stream_ps(dst + 8, _mm256_loadu_ps(v + 8));
#elif defined(__SSE__)
  for (int k = 0; k < 16; k += 4) _mm_stream_ps(dst + k, _mm_loadu_ps(v + k));
#else
  for (int k = 0; k < 16; ++k) dst[k] = v[k];
#endif
}

/// write_range with non-temporal stores for the whole 64-byte lines of y in [begin, end);
/// ordinary stores for the partial lines at either end.
void write_range_streaming(const float* __restrict__ xr, const float* __restrict__ w,
                           const float* __restrict__ b, float* __restrict__ yr, int64_t begin,
                           int64_t end, RowStats s) {
  const auto misalignment = reinterpret_cast<uintptr_t>(yr + begin) % 64;
  const int64_t head = misalignment == 0 ? 0 : static_cast<int64_t>((64 - misalignment) / 4);
  const int64_t lines_begin = std::min(end, begin + head);
  const int64_t lines_end = lines_begin + (end - lines_begin) / kLineFloats * kLineFloats;
  write_range(xr, w, b, yr, begin, lines_begin, s);
  for (int64_t c = lines_begin; c < lines_end; c += kLineFloats) {
    alignas(64) float line[kLineFloats];
#pragma omp simd
    for (int64_t k = 0; k < kLineFloats; ++k)
      line[k] = (xr[c + k] - s.mean) * s.rstd * w[c + k] + b[c + k];
    stream_line(yr + c, line);
  }
  write_range(xr, w, b, yr, lines_end, end, s);
}
#endif

/// Writes [begin, end) of `count` consecutive rows: column blocks outside, rows inside, so that a
/// block of w and b is read from memory once for all the rows.
void write_group(const float* x, const float* w, const float* b, float* y, int64_t count,
                 int64_t cols, int64_t begin, int64_t end, const RowStats* stats) {
  for (int64_t block = begin; block < end; block += kBlockCols) {
    const int64_t block_end = std::min(end, block + kBlockCols);
    for (int64_t i = 0; i < count; ++i) {
#if KF_STREAM_STORES
      write_range_streaming(x + i * cols, w, b, y + i * cols, block, block_end, stats[i]);
#else
      write_range(x + i * cols, w, b, y + i * cols, block, block_end, stats[i]);
#endif
    }
  }
}

/// Whether a whole row, with w and b, fits within three quarters of a core's L2 (the rest for y's
/// lines in flight and the stack), so that the write pass re-reads it from cache.
bool row_fits_l2(int64_t cols) {
  long l2_bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2_bytes <= 0) l2_bytes = 1 << 20;  // unknown: assume 1 MiB, small for any recent core
  return 3 * cols * static_cast<int64_t>(sizeof(float)) <= static_cast<int64_t>(l2_bytes) * 3 / 4;
}

/// Rows that fit in L2, at least one per thread: whole rows over the threads (static schedule,
/// no barrier), each row's statistics and then its write pass, which finds the row in cache.
void layernorm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows,
                    int64_t cols, double eps) {
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < rows; ++r) {
      const Partial p = chunk_stats(x + r * cols, 0, cols);
      const RowStats s = combine(&p, 1, 1, cols, eps);
      write_group(x + r * cols, w, b, y + r * cols, 1, cols, 0, cols, &s);
    }
#if KF_STREAM_STORES && defined(__SSE__)
    _mm_sfence();  // non-temporal stores are weakly ordered: complete them before returning
#endif
  }
}

/// Long rows (or fewer rows than threads): each thread reduces its column chunk of every row,
/// one barrier, every thread merges the partials of every row, then writes its chunk of every
/// row, column blocks outside and rows inside.
void layernorm_split(const float* x, const float* w, const float* b, float* y, int64_t rows,
                     int64_t cols, double eps) {
  const int max_threads = omp_get_max_threads();
  // partials[t * rows + r]: thread t's chunk of row r.
  std::vector<Partial> partials(static_cast<size_t>(max_threads) * static_cast<size_t>(rows));
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    // Chunks of whole 64-byte lines, so no two threads write one cache line of y.
    const int64_t lines = (cols + kLineFloats - 1) / kLineFloats;
    const int64_t begin = std::min(cols, lines * t / threads * kLineFloats);
    const int64_t end = std::min(cols, lines * (t + 1) / threads * kLineFloats);
    Partial* mine = partials.data() + static_cast<size_t>(t) * static_cast<size_t>(rows);
    for (int64_t r = 0; r < rows; ++r) mine[r] = chunk_stats(x + r * cols, begin, end);
#pragma omp barrier
    std::vector<RowStats> stats(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) stats[r] = combine(partials.data() + r, rows, threads, cols, eps);
    write_group(x, w, b, y, rows, cols, begin, end, stats.data());
#if KF_STREAM_STORES && defined(__SSE__)
    _mm_sfence();  // non-temporal stores are weakly ordered: complete them before returning
#endif
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
  const bool by_rows = rows >= omp_get_max_threads() && row_fits_l2(cols);
  (by_rows ? layernorm_rows : layernorm_split)(
      kf::data_of<const float>(x), kf::data_of<const float>(w), kf::data_of<const float>(b),
      kf::data_of<float>(y), rows, cols, args->scalars[0]);
  return 0;
}

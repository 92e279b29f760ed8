// Log-softmax over the last dimension (cpu), plain loops:
//   y[r, c] = (x[r, c] - m) - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :]
// (in that order: x - m is exact near the max, so an output near 0 keeps its relative accuracy
// even when |m| is large, which x - (m + log sum) would not).
// ONLINE = 0: a max pass, a pass that sums exp(x - m), a write pass y = (x - m) - log(sum) (x read three
//             times, y written once).
// ONLINE = 1: one pass keeps a running (max, sum), rescaling the sum when the max grows; then the
//             write pass (x read twice, y written once).
// ACCUMULATORS interleaved partial results (max, sum, or (max, sum) pairs) break the serial
// dependency chains. Scalar std::exp from libm. PARALLEL = 1 spreads rows over OpenMP threads.
// fp32 accumulate.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_ACCUMULATORS
#define KF_ACCUMULATORS 1
#endif
#ifndef KF_ONLINE
#define KF_ONLINE 0
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_ACCUMULATORS >= 1 && KF_ACCUMULATORS <= 32, "ACCUMULATORS in [1, 32]");
static_assert(KF_ONLINE == 0 || KF_ONLINE == 1, "ONLINE is 0 or 1");

namespace {

void log_softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
  constexpr int A = KF_ACCUMULATORS;
#if KF_ONLINE
  // Running (max, sum) per accumulator; -FLT_MAX / 0 is the identity (exp underflows to 0).
  float m[A], s[A];
  for (int k = 0; k < A; ++k) {
    m[k] = -FLT_MAX;
    s[k] = 0.0f;
  }
  auto update = [](float& mk, float& sk, float v) {
    if (v > mk) {
      sk = sk * std::exp(mk - v) + 1.0f;
      mk = v;
    } else {
      sk += std::exp(v - mk);
    }
  };
  int64_t c = 0;
  for (; c + A <= cols; c += A)
    for (int k = 0; k < A; ++k) update(m[k], s[k], xr[c + k]);
  for (; c < cols; ++c) update(m[0], s[0], xr[c]);
  float mx = m[0];
  for (int k = 1; k < A; ++k) mx = std::fmax(mx, m[k]);
  float sum = 0.0f;
  for (int k = 0; k < A; ++k) sum += s[k] * std::exp(m[k] - mx);
  const float log_sum = std::log(sum);
  for (c = 0; c < cols; ++c) yr[c] = (xr[c] - mx) - log_sum;
#else
  float m[A];
  for (int k = 0; k < A; ++k) m[k] = -FLT_MAX;
  int64_t c = 0;
  for (; c + A <= cols; c += A)
    for (int k = 0; k < A; ++k) m[k] = xr[c + k] > m[k] ? xr[c + k] : m[k];
  for (; c < cols; ++c) m[0] = xr[c] > m[0] ? xr[c] : m[0];
  float mx = m[0];
  for (int k = 1; k < A; ++k) mx = m[k] > mx ? m[k] : mx;

  float s[A] = {};
  for (c = 0; c + A <= cols; c += A)
    for (int k = 0; k < A; ++k) s[k] += std::exp(xr[c + k] - mx);
  for (; c < cols; ++c) s[0] += std::exp(xr[c] - mx);
  float sum = 0.0f;
  for (int k = 0; k < A; ++k) sum += s[k];
  const float log_sum = std::log(sum);
  for (c = 0; c < cols; ++c) yr[c] = (xr[c] - mx) - log_sum;
#endif
}

}  // namespace

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) log_softmax_row(xp + r * cols, yp + r * cols, cols);
  return 0;
}

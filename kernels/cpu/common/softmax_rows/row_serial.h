// Softmax and log-softmax over the last dimension (cpu), plain loops (kernels/cpu/softmax and
// kernels/cpu/log_softmax, row_serial.cpp, which pass their output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// ONLINE = 0: a max pass, a sum pass, a write pass. For softmax the sum pass writes
//             e = exp(x - m) into y and the write pass scales y by 1 / sum; for log-softmax it
//             only sums and the write pass computes y = (x - m) - log(sum) (x read three times).
// ONLINE = 1: one pass keeps a running (max, sum), rescaling the sum when the max grows; then a
//             write pass computes y from x (x read twice, y written once).
// ACCUMULATORS interleaved partial results (max, sum, or (max, sum) pairs) break the serial
// dependency chains. Scalar std::exp from libm. PARALLEL = 1 spreads rows over OpenMP threads.
// fp32 accumulate.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#pragma once

#include <cpu/common/softmax_rows/rows.h>

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

namespace kf::softmax_rows::row_serial {

// Internal linkage, as when this code sat in each kernel's own file (one translation unit
// includes it): GCC then inlines what is called once exactly as it did there, so the machine
// code stays the one that was measured.
namespace {

/// y of one row xr [cols] into yr.
template <class Output>
void row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
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
  const float row_constant = Output::row_constant(sum);
  if constexpr (Output::kFromExp) {
    for (c = 0; c < cols; ++c) yr[c] = Output::from_exp(std::exp(xr[c] - mx), row_constant);
  } else {
    for (c = 0; c < cols; ++c) yr[c] = Output::from_shifted(xr[c] - mx, row_constant);
  }
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
  if constexpr (Output::kFromExp) {  // keep e = exp(x - m) in y for the write pass
    for (c = 0; c + A <= cols; c += A)
      for (int k = 0; k < A; ++k) {
        const float e = std::exp(xr[c + k] - mx);
        yr[c + k] = e;
        s[k] += e;
      }
    for (; c < cols; ++c) {
      const float e = std::exp(xr[c] - mx);
      yr[c] = e;
      s[0] += e;
    }
  } else {
    for (c = 0; c + A <= cols; c += A)
      for (int k = 0; k < A; ++k) s[k] += std::exp(xr[c + k] - mx);
    for (; c < cols; ++c) s[0] += std::exp(xr[c] - mx);
  }
  float sum = 0.0f;
  for (int k = 0; k < A; ++k) sum += s[k];
  const float row_constant = Output::row_constant(sum);
  if constexpr (Output::kFromExp) {
    for (c = 0; c < cols; ++c) yr[c] = Output::from_exp(yr[c], row_constant);
  } else {
    for (c = 0; c < cols; ++c) yr[c] = Output::from_shifted(xr[c] - mx, row_constant);
  }
#endif
}

/// The entry point (kforge_run) of a row_serial variant; Output is kf::SoftmaxOutput or
/// kf::LogSoftmaxOutput. Returns 0 or an error code (see the file comment).
template <class Output>
int run(const kforge_args* args) {
  if (const int error = check_rows(args)) return error;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
#if KF_PARALLEL
#pragma omp parallel for schedule(static)
#endif
  for (int64_t r = 0; r < rows; ++r) row<Output>(xp + r * cols, yp + r * cols, cols);
  return 0;
}

}  // namespace
}  // namespace kf::softmax_rows::row_serial

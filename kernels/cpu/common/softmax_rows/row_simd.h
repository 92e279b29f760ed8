// Softmax and log-softmax over the last dimension (cpu), explicit SIMD (kernels/cpu/softmax and
// kernels/cpu/log_softmax, row_simd.cpp, which pass their output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// Every pass is an `omp simd` loop (max and sum as simd reductions, legal without -ffast-math),
// with a branch-free polynomial exp (kf::exp_vectorizable in kernels/cpu/common/vmath.h: Cephes
// expf, range reduction by ln 2, degree-6 polynomial, 2^n from the exponent bits; ~1 ulp) that
// vectorizes, unlike a libm call. Three passes (max, sum of exponentials, write):
// STORE_EXP = 1 (softmax only: an output made of exp(x - m)): the sum pass writes
//                e = exp(x - m) into y and the last pass scales y (exp once, y written twice).
// STORE_EXP = 0: the last pass computes y from x (softmax: exp twice, y written once;
//                log-softmax, which ignores STORE_EXP: y = (x - m) - log(sum), exp once).
// ONLINE = 1 fuses the max and sum passes: a running (max, sum) per SIMD lane (the max of each
// block of 8 elements first, then one rescale), x read twice instead of three times; the write
// pass computes y from x.
// Each family's family.toml lists the knobs it searches: softmax STORE_EXP, log_softmax ONLINE.
// PARALLEL = 1 spreads rows over OpenMP threads. fp32.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#pragma once

#include <cpu/common/softmax_rows/rows.h>
#include <cpu/common/vmath.h>

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_STORE_EXP
#define KF_STORE_EXP 1
#endif
#ifndef KF_ONLINE
#define KF_ONLINE 0
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_STORE_EXP == 0 || KF_STORE_EXP == 1, "STORE_EXP is 0 or 1");
static_assert(KF_ONLINE == 0 || KF_ONLINE == 1, "ONLINE is 0 or 1");

namespace kf::softmax_rows::row_simd {

// Internal linkage, as when this code sat in each kernel's own file (one translation unit
// includes it): GCC then inlines what is called once exactly as it did there, so the machine
// code stays the one that was measured.
namespace {

/// y of one row xr [cols] into yr.
template <class Output>
void row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
#if KF_ONLINE
  // Blocks of 8: the block's max, then its exponentials against the running max. Lanes keep
  // separate (max, sum) pairs, merged at the end.
  constexpr int kLanes = 8;
  float m[kLanes], s[kLanes];
  for (int k = 0; k < kLanes; ++k) {
    m[k] = -FLT_MAX;
    s[k] = 0.0f;
  }
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) {
      const float v = xr[c + k];
      const float nm = v > m[k] ? v : m[k];
      s[k] = s[k] * kf::exp_vectorizable(m[k] - nm) + kf::exp_vectorizable(v - nm);
      m[k] = nm;
    }
  }
  for (int k = 0; c < cols; ++c, ++k) {
    const float v = xr[c];
    const float nm = v > m[k] ? v : m[k];
    s[k] = s[k] * kf::exp_vectorizable(m[k] - nm) + kf::exp_vectorizable(v - nm);
    m[k] = nm;
  }
  float mx = m[0];
  for (int k = 1; k < kLanes; ++k) mx = m[k] > mx ? m[k] : mx;
  float sum = 0.0f;
  for (int k = 0; k < kLanes; ++k) sum += s[k] * kf::exp_vectorizable(m[k] - mx);
#else
  float mx = -FLT_MAX;
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < cols; ++c) mx = xr[c] > mx ? xr[c] : mx;
  float sum = 0.0f;
  if constexpr (Output::kFromExp && KF_STORE_EXP) {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) {
      const float e = kf::exp_vectorizable(xr[c] - mx);
      yr[c] = e;
      sum += e;
    }
    const float row_constant = Output::row_constant(sum);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = Output::from_exp(yr[c], row_constant);
    return;  // y is complete; the passes below compute it from x instead
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += kf::exp_vectorizable(xr[c] - mx);
#endif
  const float row_constant = Output::row_constant(sum);
  if constexpr (Output::kFromExp) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = Output::from_exp(kf::exp_vectorizable(xr[c] - mx), row_constant);
    }
  } else {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = Output::from_shifted(xr[c] - mx, row_constant);
  }
}

/// The entry point (kforge_run) of a row_simd variant; Output is kf::SoftmaxOutput or
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
}  // namespace kf::softmax_rows::row_simd

// Vectorizable math for kforge's built-in cpu kernels (kernels/cpu/*): functions written as
// straight-line fp32 arithmetic so that GCC vectorizes the `omp simd` loops that call them
// (libm's expf is a call it does not vectorize without -ffast-math, which the kernels are not
// built with). Used by the element-wise (silu) and the softmax / log-softmax families.
#pragma once

#include <cstdint>

namespace kf {

/// exp(x) for x in [-87.3, 88.3], unchecked: the arithmetic of exp_vectorizable without its
/// range checks, for callers whose argument is known to lie in that range (erf_vectorizable).
/// Outside it the result is undefined.
inline __attribute__((always_inline)) float exp_vectorizable_in_range(float x) {
  // n = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to nearest in fp32.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in the exponent bits: n is in [-126, 127] for x in [-87.3, 88.3], a normal power of two.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/// exp(x) for fp32 in straight-line arithmetic that GCC vectorizes inside `omp simd` loops (libm's
/// expf is a call it does not vectorize without -ffast-math). Method: Cody-Waite range reduction
/// x = n ln2 + r with ln2 split in two parts, |r| <= ln2 / 2, and the degree-6 polynomial of the
/// Cephes library's expf (S. L. Moshier, "Methods and Programs for Mathematical Functions", 1989;
/// W. J. Cody and W. Waite, "Software Manual for the Elementary Functions", 1980, ch. 6); 2^n is
/// built in the exponent bits. Error within ~2 ulp of the correctly rounded result for
/// x in [-87.3, 88.3]; above: +inf, below: 0 (the true value is < 1.2e-38); NaN gives NaN.
inline __attribute__((always_inline)) float exp_vectorizable(float x) {
  constexpr float kHi = 88.3f, kLo = -87.3f;
  const float xc = x > kHi ? kHi : (x < kLo ? kLo : x);  // NaN compares false: stays NaN
  const float result = exp_vectorizable_in_range(xc);
  return x > kHi ? __builtin_inff() : (x < kLo ? 0.0f : result);
}

/// erf(x) for fp32 in straight-line arithmetic that GCC vectorizes inside `omp simd` loops (libm's
/// erff is a call it does not vectorize without -ffast-math). Method, as in Arm's
/// optimized-routines erff (math/erff.c, 2020): for |x| < 0.921875, erf(x) = x + x P(x^2) with P
/// of degree 5; for 0.921875 <= |x|, erf(|x|) = 1 - exp(-(a + a Q(a))) with a = min(|x|, 4) and
/// Q of degree 5 (erfc(4) = 1.5e-8 is below half an ulp of 1, so from 4 on this is exactly 1).
/// Both branches are computed and one is selected, so the loop has no branch. The coefficients
/// are this file's own weighted minimax fits (Lawson's iteratively reweighted least squares in
/// 40-digit arithmetic on each interval; relative error of erf before rounding to fp32: 1.6e-8
/// for P, 3.0e-9 for Q; one degree less gives 5.2e-7 and 9.2e-8). Error against erf in double,
/// every float in [1e-30, 8) in relative steps of 3e-6: within 1 ulp of the correctly rounded
/// result, with or without FMA contraction (tests/vmath_erf_test.cpp holds it to 2 ulp); odd by
/// construction; erf(+-0) = +-0, erf(+-inf) = +-1, NaN gives NaN.
inline __attribute__((always_inline)) float erf_vectorizable(float x) {
  constexpr float kSplit = 0.921875f, kSaturate = 4.0f;
  const float a = __builtin_fabsf(x);
  // |x| < kSplit: odd polynomial x (1 + P(x^2)).
  const float s = x * x;
  float p = -5.990852951e-4f;
  p = p * s + 4.993181676e-3f;
  p = p * s + -2.676661871e-2f;
  p = p * s + 1.128181666e-1f;
  p = p * s + -3.761249483e-1f;
  p = p * s + 1.283791512e-1f;
  const float near_zero = x + x * p;
  // |x| >= kSplit: 1 - exp(-(a + a Q(a))). Clamping a keeps the exp argument in [-17.4, -0.9]
  // whatever x (huge, infinite or NaN, none of which selects this branch's raw value).
  const float ac = a < kSaturate ? a : kSaturate;
  float q = -2.139250137e-4f;
  q = q * ac + 3.214460099e-3f;
  q = q * ac + -2.288836986e-2f;
  q = q * ac + 1.052593514e-1f;
  q = q * ac + 6.357201934e-1f;
  q = q * ac + 1.285137981e-1f;
  const float tail = 1.0f - exp_vectorizable_in_range(-(ac + ac * q));
  const float result = a < kSplit ? near_zero : (x < 0.0f ? -tail : tail);
  return x != x ? x : result;  // NaN in, NaN out (a < kSplit is false for NaN)
}

}  // namespace kf

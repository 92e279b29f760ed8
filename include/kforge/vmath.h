// Vectorizable math for kforge's built-in cpu kernels (kernels/cpu/*): functions written as
// straight-line fp32 arithmetic so that GCC vectorizes the `omp simd` loops that call them
// (libm's expf is a call it does not vectorize without -ffast-math, which the kernels are not
// built with). Used by the element-wise (silu) and the softmax / log-softmax families.
#pragma once

#include <cstdint>

namespace kf {

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
  // n = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to nearest in fp32.
  constexpr float kRound = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + kRound) - kRound;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in the exponent bits: n is in [-126, 127] for x in [kLo, kHi], a normal power of two.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  const float result = p * scale;
  return x > kHi ? __builtin_inff() : (x < kLo ? 0.0f : result);
}

}  // namespace kf

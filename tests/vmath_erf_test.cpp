// kf::erf_vectorizable (kernels/cpu/common/vmath.h), the erf the cpu gelu kernel uses so that its
// loop vectorizes: accuracy against erf in double over a dense range, the edges, and the GELU
// built on it against GELU in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <cpu/common/vmath.h>

namespace {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  // Map the sign-magnitude bit patterns to a monotonic integer line, so that -0 and +0 coincide
  // and distances across zero count correctly.
  const int64_t la = ia < 0 ? -static_cast<int64_t>(ia & 0x7fffffff) : ia;
  const int64_t lb = ib < 0 ? -static_cast<int64_t>(ib & 0x7fffffff) : ib;
  return std::llabs(la - lb);
}

float erf_rounded(float x) { return static_cast<float>(std::erf(static_cast<double>(x))); }

TEST(ErfVectorizable, WithinTwoUlpOfTheCorrectlyRoundedErfOnAnEvenGrid) {
  int64_t worst = 0;
  float worst_x = 0.0f;
  // Steps of 1e-5 over [-6, 6]: both branches, the switch at 0.921875 and the saturation at 4.
  for (int64_t i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const int64_t d = ulp_distance(kf::erf_vectorizable(x), erf_rounded(x));
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(ErfVectorizable, WithinTwoUlpOnAGeometricGridDownToTinyArguments) {
  // Relative accuracy near zero, where erf(x) ~ 1.128 x, and on every binade up to saturation.
  int64_t worst = 0;
  float worst_x = 0.0f;
  for (float x = 1e-30f; x < 8.0f; x *= 1.0001f) {
    for (const float v : {x, -x}) {
      const int64_t d = ulp_distance(kf::erf_vectorizable(v), erf_rounded(v));
      if (d > worst) {
        worst = d;
        worst_x = v;
      }
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(ErfVectorizable, EdgesAreSignedZeroOneAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kf::erf_vectorizable(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(kf::erf_vectorizable(-0.0f)));
  EXPECT_EQ(kf::erf_vectorizable(4.0f), 1.0f);
  EXPECT_EQ(kf::erf_vectorizable(-4.0f), -1.0f);
  EXPECT_EQ(kf::erf_vectorizable(1e30f), 1.0f);
  EXPECT_EQ(kf::erf_vectorizable(inf), 1.0f);
  EXPECT_EQ(kf::erf_vectorizable(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(kf::erf_vectorizable(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ErfVectorizable, GeluOnItStaysWithinTheGeluTaskTolerance) {
  // examples/gelu/task.toml: |y - ref| <= atol + rtol |ref| with rtol = atol = 1e-5, the
  // reference in double. The worst case is near x = -4, where 1 + erf(x / sqrt(2)) cancels.
  double worst = 0.0;
  float worst_x = 0.0f;
  for (int64_t i = -2000000; i <= 2000000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const float y = 0.5f * x * (1.0f + kf::erf_vectorizable(x * 0.70710678118654752f));
    const double xd = x;
    const double ref = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    const double excess = std::fabs(y - ref) / (1e-5 + 1e-5 * std::fabs(ref));
    if (excess > worst) {
      worst = excess;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 0.1) << "at x = " << worst_x << " (1.0 is the tolerance)";
}

}  // namespace

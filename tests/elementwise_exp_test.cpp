// kf::exp_vectorizable (kernels/cpu/common/elementwise.h), the exp the cpu silu kernel uses so
// that its loop vectorizes: accuracy against libm over the whole finite range, and the edges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <cpu/common/elementwise.h>

namespace {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return std::llabs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

TEST(ExpVectorizable, WithinTwoUlpOfTheCorrectlyRoundedExpOverTheFiniteRange) {
  int64_t worst = 0;
  float worst_x = 0.0f;
  for (float x = -87.3f; x <= 88.3f; x += 0.0007f) {
    const float expected = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t d = ulp_distance(kf::exp_vectorizable(x), expected);
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(ExpVectorizable, EdgesAreInfinityZeroAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kf::exp_vectorizable(0.0f), 1.0f);
  EXPECT_EQ(kf::exp_vectorizable(100.0f), inf);
  EXPECT_EQ(kf::exp_vectorizable(inf), inf);
  EXPECT_EQ(kf::exp_vectorizable(-100.0f), 0.0f);
  EXPECT_EQ(kf::exp_vectorizable(-inf), 0.0f);
  EXPECT_TRUE(std::isnan(kf::exp_vectorizable(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(kf::exp_vectorizable(88.3f)));  // n = 128 must not overflow 2^n
  EXPECT_LE(ulp_distance(kf::exp_vectorizable(88.3f),
                         static_cast<float>(std::exp(static_cast<double>(88.3f)))), 2);
}

}  // namespace

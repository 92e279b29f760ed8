#include "worker/host_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kforge::worker {
namespace {

TEST(HostData, HalfConversionsOfKnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);  // largest finite half
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // rounds up to inf
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (zero)
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_TRUE(std::isnan(half_to_float(0xFFFF)));  // the poison pattern

  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(HostData, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float value = half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_half(value), bits) << std::hex << bits;
  }
}

TEST(HostData, BfloatConversions) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie to even (up)
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0xFFFF)));
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float value = bfloat16_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_bfloat16(value), bits) << std::hex << bits;
  }
}

TEST(HostData, DlpackTypes) {
  EXPECT_EQ(to_dl_dtype(DType::f32).code, kDLFloat);
  EXPECT_EQ(to_dl_dtype(DType::f32).bits, 32);
  EXPECT_EQ(to_dl_dtype(DType::bf16).code, kDLBfloat);
  EXPECT_EQ(to_dl_dtype(DType::bf16).bits, 16);
  EXPECT_EQ(to_dl_dtype(DType::f16).code, kDLFloat);
  EXPECT_EQ(to_dl_dtype(DType::i64).code, kDLInt);
  EXPECT_EQ(to_dl_dtype(DType::i64).bits, 64);
  EXPECT_EQ(to_dl_dtype(DType::f64).lanes, 1);
}

TEST(HostData, InputsAreDeterministicPerSeedAndTensor) {
  const auto a = make_input(DType::f32, 1000, 7, 0);
  EXPECT_EQ(a, make_input(DType::f32, 1000, 7, 0));
  EXPECT_NE(a, make_input(DType::f32, 1000, 8, 0));
  EXPECT_NE(a, make_input(DType::f32, 1000, 7, 1));
  ASSERT_EQ(a.size(), 4000u);
  double sum = 0, min = 1, max = -1;
  for (int64_t i = 0; i < 1000; ++i) {
    const double value = element_as_double(DType::f32, a.data(), i);
    ASSERT_GE(value, -1.0);
    ASSERT_LE(value, 1.0);
    sum += value;
    min = std::min(min, value);
    max = std::max(max, value);
  }
  EXPECT_LT(std::fabs(sum / 1000), 0.1);  // centred
  EXPECT_LT(min, -0.9);
  EXPECT_GT(max, 0.9);
}

TEST(HostData, InputsArePinnedAcrossVersions) {
  // Golden values: a change of generator would silently change every recorded experiment.
  const auto a = make_input(DType::f32, 3, 7, 0);
  EXPECT_FLOAT_EQ(element_as_double(DType::f32, a.data(), 0), -0.460978448);
  EXPECT_FLOAT_EQ(element_as_double(DType::f32, a.data(), 1), -0.846906662);
  EXPECT_FLOAT_EQ(element_as_double(DType::f32, a.data(), 2), -0.639404595);
  const auto ints = make_input(DType::i32, 3, 7, 1);
  EXPECT_EQ(element_as_double(DType::i32, ints.data(), 0), -6);
  EXPECT_EQ(element_as_double(DType::i32, ints.data(), 2), -15);
}

TEST(HostData, IntegerAndHalfInputs) {
  const auto ints = make_input(DType::i32, 500, 3, 2);
  bool saw_negative = false, saw_positive = false;
  for (int64_t i = 0; i < 500; ++i) {
    const double value = element_as_double(DType::i32, ints.data(), i);
    ASSERT_GE(value, -16);
    ASSERT_LE(value, 16);
    saw_negative |= value < 0;
    saw_positive |= value > 0;
  }
  EXPECT_TRUE(saw_negative && saw_positive);
  const auto halves = make_input(DType::f16, 100, 3, 0);
  ASSERT_EQ(halves.size(), 200u);
  for (int64_t i = 0; i < 100; ++i) {
    const double value = element_as_double(DType::f16, halves.data(), i);
    ASSERT_TRUE(std::isfinite(value));
    ASSERT_LE(std::fabs(value), 1.0);
  }
}

TEST(HostData, ElementCount) {
  EXPECT_EQ(element_count({}), 1);
  EXPECT_EQ(element_count({3, 4, 5}), 60);
}

}  // namespace
}  // namespace kforge::worker

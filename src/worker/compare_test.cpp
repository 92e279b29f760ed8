#include "worker/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "worker/host_data.h"

namespace kforge::worker {
namespace {

std::vector<std::byte> floats(std::initializer_list<float> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const Tolerance kTolerance{1e-3, 1e-4};

Comparison compare(std::initializer_list<float> got, std::initializer_list<float> expected) {
  return compare_elements(DType::f32, floats(got), floats(expected),
                          static_cast<int64_t>(got.size()), kTolerance);
}

TEST(Compare, WithinToleranceUsesAtolPlusRtolTimesReference) {
  // Allowed at expected=10: 1e-4 + 1e-3 * 10 = 0.0101.
  EXPECT_TRUE(compare({10.01f, 0.0f}, {10.0f, 0.00005f}).passed);
  Comparison result = compare({10.02f, 0.0f}, {10.0f, 0.0f});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 0);
  EXPECT_NEAR(result.max_abs_error, 0.02, 1e-6);
  EXPECT_NEAR(result.max_rel_error, 0.002, 1e-6);
}

TEST(Compare, NaNWhereReferenceHasANumberFails) {
  Comparison result = compare({1.0f, kNaN, 3.0f}, {1.0f, 2.0f, 3.0f});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 1);
  EXPECT_TRUE(std::isnan(result.got));
  EXPECT_EQ(result.expected, 2.0);
  EXPECT_TRUE(std::isinf(result.max_abs_error));
}

TEST(Compare, NaNAndInfinityPolicy) {
  EXPECT_TRUE(compare({kNaN}, {kNaN}).passed);
  EXPECT_FALSE(compare({1.0f}, {kNaN}).passed);
  EXPECT_TRUE(compare({kInf}, {kInf}).passed);
  EXPECT_FALSE(compare({-kInf}, {kInf}).passed);
  EXPECT_FALSE(compare({kInf}, {1e30f}).passed);
  EXPECT_FALSE(compare({1e30f}, {kInf}).passed);
}

TEST(Compare, ReportsFirstFailureButMaxOverAll) {
  Comparison result = compare({1.5f, 1.0f, 5.0f}, {1.0f, 1.0f, 1.0f});
  EXPECT_EQ(result.first_failure, 0);
  EXPECT_EQ(result.got, 1.5);
  EXPECT_EQ(result.max_abs_error, 4.0);
  EXPECT_EQ(result.max_rel_error, 4.0);
}

TEST(Compare, HalfPrecisionValuesAreWidened) {
  std::vector<std::byte> got(4), expected(4);
  const uint16_t got_bits[2] = {float_to_half(1.0f), 0xFFFF};
  const uint16_t expected_bits[2] = {float_to_half(1.0f), float_to_half(0.5f)};
  std::memcpy(got.data(), got_bits, 4);
  std::memcpy(expected.data(), expected_bits, 4);
  Comparison result = compare_elements(DType::f16, got, expected, 2, kTolerance);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 1);
  EXPECT_EQ(result.expected, 0.5);
}

TEST(Compare, FirstChangedElement) {
  const auto before = floats({1, 2, 3, 4});
  auto after = before;
  EXPECT_FALSE(first_changed_element(before, after, 4).has_value());
  after[9] = std::byte{0x55};  // a byte inside element 2
  EXPECT_EQ(first_changed_element(before, after, 4), 2);
  // -0.0 vs 0.0 compare equal as numbers but differ bitwise: a write is a write.
  EXPECT_EQ(first_changed_element(floats({0.0f}), floats({-0.0f}), 4), 0);
}

TEST(Compare, FormatsIndicesAndValues) {
  EXPECT_EQ(format_index(0, {4, 9}), "[0, 0]");
  EXPECT_EQ(format_index(23, {4, 9}), "[2, 5]");
  EXPECT_EQ(format_index(59, {3, 4, 5}), "[2, 3, 4]");
  EXPECT_EQ(format_index(7, {10}), "[7]");
  EXPECT_EQ(format_value(0.5), "0.5");
  EXPECT_EQ(format_value(std::nan("")), "nan");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-inf");
}

}  // namespace
}  // namespace kforge::worker

#include "evaluation/comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "worker/host_data.h"

namespace kforge::evaluation {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float v : values) bits.push_back(worker::float_to_bfloat16(v));
  return bits;
}

/// n floats uniform in [-1, 1], the same for every call with the same seed.
std::vector<float> uniform(int64_t n, uint64_t seed = 1) {
  std::vector<std::byte> bytes = worker::make_input(DType::f32, n, seed, 0);
  std::vector<float> values(n);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

OutputComparison compare_f32(const std::vector<float>& got, const std::vector<float>& expected,
                             std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(expected.size())};
  return compare_output(DType::f32, bytes_of(got), bytes_of(expected), shape,
                        default_tolerance(DType::f32));
}

TEST(Comparison, DefaultTolerancesPerDtype) {
  EXPECT_EQ(default_tolerance(DType::f64).rtol, 1e-9);
  EXPECT_EQ(default_tolerance(DType::f32).atol, 1e-5);
  EXPECT_EQ(default_tolerance(DType::f32).max_normalized_error, 2e-5);
  EXPECT_EQ(default_tolerance(DType::bf16).rtol, 1e-2);
  EXPECT_EQ(default_tolerance(DType::f16).max_normalized_error, 5e-3);
  EXPECT_EQ(default_tolerance(DType::i64).atol, 0.0);
}

TEST(Comparison, TaskToleranceScalesTheNormBoundWithRtol) {
  const ToleranceSpec loose = tolerance_with(DType::f32, 1e-3, 1e-4);
  EXPECT_EQ(loose.rtol, 1e-3);
  EXPECT_EQ(loose.atol, 1e-4);
  EXPECT_NEAR(loose.max_normalized_error, 2e-4, 1e-18);
  EXPECT_EQ(tolerance_with(DType::i32, 0.5, 0.0).max_normalized_error, 0.5);
}

TEST(Comparison, ElementBoundIsAtolPlusRtolTimesExpected) {
  // At expected 10 the allowed difference is 1e-5 + 1e-4 * 10 = 1.01e-3. (One element at 0.9
  // rtol among a hundred exact ones stays within the norm-wise bound too.)
  std::vector<float> expected(100, 10.0f), got(100, 10.0f);
  got[0] = 10.0009f;
  expected[1] = 0.000009f;
  got[1] = 0;
  EXPECT_TRUE(compare_f32(got, expected).passed) << compare_f32(got, expected).failure;
  OutputComparison result = compare_f32({1, 2, 3, 10.002f}, {1, 2, 3, 10}, {2, 2});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 3);
  EXPECT_EQ(result.mismatched_elements, 1);
  EXPECT_EQ(result.nonfinite_mismatches, 0);
  EXPECT_NEAR(result.max_abs_error, 0.002, 1e-6);
  EXPECT_NEAR(result.max_rel_error, 0.0002, 1e-7);
  EXPECT_EQ(result.failure,
            "element [1, 1] is 10.002, expected 10: difference 0.0019998550415039062 exceeds the "
            "allowed 0.00101 (atol 1e-05 + rtol 1e-04 x |expected|); 1 of 4 elements are wrong");
}

TEST(Comparison, NaNWhereTheReferenceHasANumberSaysTheElementWasNeverWritten) {
  OutputComparison result = compare_f32({1, kNaN, 3}, {1, 2, 3});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 1);
  EXPECT_EQ(result.nonfinite_mismatches, 1);
  EXPECT_TRUE(std::isinf(result.max_abs_error));
  EXPECT_TRUE(std::isinf(result.normalized_error));
  EXPECT_NE(result.failure.find("element [1] is nan, expected 2"), std::string::npos);
  EXPECT_NE(result.failure.find("never wrote"), std::string::npos);
}

TEST(Comparison, NaNMustMatchPositionForPosition) {
  EXPECT_TRUE(compare_f32({1, kNaN}, {1, kNaN}).passed);
  OutputComparison result = compare_f32({1, 5}, {1, kNaN});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 1);
  EXPECT_NE(result.failure.find("must be NaN too"), std::string::npos);
  EXPECT_FALSE(compare_f32({kInf}, {kNaN}).passed);
}

TEST(Comparison, InfinitiesMustMatchWithTheirSign) {
  EXPECT_TRUE(compare_f32({kInf, -kInf}, {kInf, -kInf}).passed);
  OutputComparison sign = compare_f32({0, -kInf}, {0, kInf});
  EXPECT_FALSE(sign.passed);
  EXPECT_EQ(sign.first_failure, 1);
  EXPECT_NE(sign.failure.find("infinities must match exactly"), std::string::npos);
  EXPECT_FALSE(compare_f32({3e38f}, {kInf}).passed);   // finite where inf
  EXPECT_FALSE(compare_f32({kNaN}, {kInf}).passed);
  OutputComparison overflow = compare_f32({kInf}, {3e38f});  // inf where finite
  EXPECT_FALSE(overflow.passed);
  EXPECT_NE(overflow.failure.find("an infinity where the reference is finite"), std::string::npos);
}

TEST(Comparison, WrongElementIsFoundInBlocksAndInTheTail) {
  // 3 full blocks of the vectorized path plus a 5-element tail.
  const int64_t n = 3 * 2048 + 5;
  const std::vector<float> expected = uniform(n);
  for (int64_t wrong : {int64_t{0}, int64_t{2047}, int64_t{4100}, n - 1}) {
    std::vector<float> got = expected;
    got[wrong] += 0.01f;
    OutputComparison result = compare_f32(got, expected);
    EXPECT_FALSE(result.passed) << wrong;
    EXPECT_EQ(result.first_failure, wrong);
    EXPECT_EQ(result.mismatched_elements, 1);
  }
  EXPECT_TRUE(compare_f32(expected, expected).passed);
}

TEST(Comparison, ErrorStatisticsAreExactOnTheVectorizedPath) {
  // Four full blocks, no failure: every statistic comes from the branch-free pass.
  std::vector<float> expected(8192, 0.5f), got(8192, 0.5f);
  expected[5000] = 0.0f;
  got[5000] = 1e-6f;  // error where expected is 0: counts in max_abs_error, not max_rel_error
  got[6001] = 0.50001f;
  OutputComparison result = compare_f32(got, expected);
  EXPECT_TRUE(result.passed) << result.failure;
  EXPECT_EQ(result.max_abs_error, static_cast<double>(0.50001f) - 0.5);
  EXPECT_EQ(result.max_rel_error, (static_cast<double>(0.50001f) - 0.5) / 0.5);
  const double squared_errors = 1e-12 + std::pow(static_cast<double>(0.50001f) - 0.5, 2);
  EXPECT_NEAR(result.normalized_error, std::sqrt(squared_errors / (8191 * 0.25)), 1e-12);
  EXPECT_EQ(result.mismatched_elements, 0);
}

TEST(Comparison, NormBoundCatchesASystematicBiasThatEveryElementAllows) {
  const std::vector<float> expected = uniform(10000);
  std::vector<float> got = expected;
  for (float& v : got) v *= 1.0f + 0.9f * 1e-4f;  // 0.9 rtol on every element
  OutputComparison result = compare_f32(got, expected);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, -1);
  EXPECT_EQ(result.mismatched_elements, 0);
  EXPECT_NEAR(result.normalized_error, 9e-5, 1e-6);
  EXPECT_EQ(result.failure.rfind("every element is within tolerance but the error is systematic",
                                 0),
            0u);
}

TEST(Comparison, RoundingNoiseAndAFewLargeErrorsPass) {
  const std::vector<float> expected = uniform(10000);
  std::vector<float> got = expected;
  for (size_t i = 0; i < got.size(); ++i) {
    got[i] = std::nextafter(got[i], i % 2 ? 2.0f : -2.0f);  // one ulp either way
  }
  for (size_t i = 0; i < got.size(); i += 1000) got[i] = expected[i] * (1 + 0.9e-4f);
  OutputComparison result = compare_f32(got, expected);
  EXPECT_TRUE(result.passed) << result.failure;
  EXPECT_LT(result.normalized_error, 2e-5);
}

TEST(Comparison, OutputsBelowAtolAreJudgedByAtolAlone) {
  // RMS error <= max_normalized_error * RMS(expected) + atol: doubling values of 1e-6 is an
  // absolute error of 1e-6 < atol, which the task declared acceptable.
  std::vector<float> expected = uniform(1000);
  for (float& v : expected) v *= 1e-6f;
  std::vector<float> got = expected;
  for (float& v : got) v *= 2;
  OutputComparison result = compare_f32(got, expected);
  EXPECT_TRUE(result.passed) << result.failure;
  EXPECT_NEAR(result.normalized_error, 1.0, 1e-6);
}

TEST(Comparison, Bfloat16UsesItsWiderTolerance) {
  // bf16 steps are 0.5 between 64 and 128; at 100 the allowed difference is 0.01 + 1 = 1.01.
  std::vector<float> expected(4096, 100.0f);
  auto compare_bf16 = [&](const std::vector<float>& got) {
    return compare_output(DType::bf16, bytes_of(to_bf16(got)), bytes_of(to_bf16(expected)),
                          {4096}, default_tolerance(DType::bf16));
  };
  std::vector<float> two_steps = expected;
  two_steps[7] = 101.0f;
  EXPECT_TRUE(compare_bf16(two_steps).passed);
  std::vector<float> four_steps = expected;
  four_steps[9] = 102.0f;
  OutputComparison far = compare_bf16(four_steps);
  EXPECT_FALSE(far.passed);
  EXPECT_EQ(far.first_failure, 9);
  EXPECT_NE(far.failure.find("is 102, expected 100"), std::string::npos);
  // Two steps on every element is within each element's bound but a 1% systematic error.
  OutputComparison biased = compare_bf16(std::vector<float>(4096, 101.0f));
  EXPECT_FALSE(biased.passed);
  EXPECT_EQ(biased.first_failure, -1);
  EXPECT_NEAR(biased.normalized_error, 0.01, 1e-9);
}

TEST(Comparison, HalfPrecisionUsesItsTolerance) {
  std::vector<uint16_t> expected(100, worker::float_to_half(2.0f));
  std::vector<uint16_t> got = expected;
  got[50] = worker::float_to_half(2.02f);  // allowed 0.01 + 0.02 = 0.03
  const ToleranceSpec tolerance = default_tolerance(DType::f16);
  EXPECT_TRUE(compare_output(DType::f16, bytes_of(got), bytes_of(expected), {100}, tolerance).passed);
  got[60] = worker::float_to_half(2.04f);
  OutputComparison result =
      compare_output(DType::f16, bytes_of(got), bytes_of(expected), {10, 10}, tolerance);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 60);
  EXPECT_NE(result.failure.find("element [6, 0]"), std::string::npos);
}

TEST(Comparison, IntegersMustMatchExactly) {
  const ToleranceSpec exact = default_tolerance(DType::i32);
  std::vector<int32_t> expected(5000, 7);
  EXPECT_TRUE(compare_output(DType::i32, bytes_of(expected), bytes_of(expected), {5000}, exact).passed);
  std::vector<int32_t> got = expected;
  got[4321] = 8;
  OutputComparison result = compare_output(DType::i32, bytes_of(got), bytes_of(expected), {5000}, exact);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_failure, 4321);
  EXPECT_NE(result.failure.find("is 8, expected 7: integer outputs must match exactly"),
            std::string::npos);
  // 2^60 and 2^60 + 1 are the same double; they must still differ.
  std::vector<int64_t> big = {int64_t{1} << 60}, big_plus_one = {(int64_t{1} << 60) + 1};
  OutputComparison wide = compare_output(DType::i64, bytes_of(big_plus_one), bytes_of(big), {1},
                                         default_tolerance(DType::i64));
  EXPECT_FALSE(wide.passed);
  EXPECT_NE(wide.failure.find("is 1152921504606846977, expected 1152921504606846976"),
            std::string::npos);
}

TEST(Comparison, FirstFailureIsTheSmallestIndexAcrossThreadChunks) {
  const int64_t n = 5 * (int64_t{1} << 20) + 123;  // five chunks and a ragged end
  const std::vector<float> expected = uniform(n, 3);
  std::vector<float> got = expected;
  const int64_t chunk = int64_t{1} << 20;
  for (int64_t wrong : {4 * chunk + 5, 2 * chunk + 999, 3 * chunk, n - 1}) got[wrong] = kNaN;
  got[2 * chunk + 1000] += 0.5f;
  OutputComparison first = compare_f32(got, expected);
  EXPECT_FALSE(first.passed);
  EXPECT_EQ(first.first_failure, 2 * chunk + 999);
  EXPECT_EQ(first.mismatched_elements, 5);
  EXPECT_EQ(first.nonfinite_mismatches, 4);
  for (int repeat = 0; repeat < 3; ++repeat) {
    OutputComparison again = compare_f32(got, expected);
    EXPECT_EQ(again.first_failure, first.first_failure);
    EXPECT_EQ(again.failure, first.failure);
  }
  // Sums combine in chunk order, so they are bitwise reproducible.
  std::vector<float> close = expected;
  for (float& v : close) v = std::nextafter(v, 2.0f);
  OutputComparison a = compare_f32(close, expected), b = compare_f32(close, expected);
  EXPECT_TRUE(a.passed);
  EXPECT_EQ(a.normalized_error, b.normalized_error);
  EXPECT_EQ(a.max_rel_error, b.max_rel_error);
}

TEST(Comparison, HugeAndTinyDoublesStillGiveANormalizedError) {
  const ToleranceSpec tolerance = default_tolerance(DType::f64);
  for (double scale : {1e300, 1e-300}) {
    std::vector<double> expected(3000), got(3000);
    for (int i = 0; i < 3000; ++i) {
      expected[i] = scale * (1 + i % 7);
      got[i] = expected[i] * (1 + 5e-11);
    }
    OutputComparison result =
        compare_output(DType::f64, bytes_of(got), bytes_of(expected), {3000}, tolerance);
    EXPECT_NEAR(result.normalized_error, 5e-11, 1e-13) << scale;
    EXPECT_TRUE(result.passed) << scale << ": " << result.failure;
  }
}

TEST(Comparison, RefusesShortBuffersNegativeShapesAndBadTolerances) {
  const std::vector<std::byte> eight(8);
  const ToleranceSpec tolerance = default_tolerance(DType::f32);
  EXPECT_THROW(compare_output(DType::f32, eight, eight, {3}, tolerance), Error);
  EXPECT_THROW(compare_output(DType::f64, eight, std::vector<std::byte>(16), {2}, tolerance), Error);
  EXPECT_THROW(compare_output(DType::f32, eight, eight, {-2}, tolerance), Error);
  EXPECT_THROW(compare_output(DType::f32, eight, eight, {2}, ToleranceSpec{-1, 0, 0}), Error);
  EXPECT_THROW(compare_output(DType::f32, eight, eight, {2}, ToleranceSpec{0, kNaN, 0}), Error);
  EXPECT_TRUE(compare_output(DType::f32, eight, eight, {1}, tolerance).passed);  // longer is fine
  EXPECT_TRUE(compare_output(DType::f32, {}, {}, {0, 4}, tolerance).passed);
}

TEST(Comparison, ScalarShapeComparesOneElement) {
  EXPECT_FALSE(compare_output(DType::f32, bytes_of(std::vector<float>{2}),
                              bytes_of(std::vector<float>{1}), {}, default_tolerance(DType::f32))
                   .passed);
}

TEST(Comparison, BitwiseChecks) {
  const std::vector<std::byte> a = bytes_of(std::vector<int32_t>{1, 2, 3});
  std::vector<std::byte> b = a;
  EXPECT_TRUE(bitwise_equal(a, b));
  EXPECT_EQ(first_changed_element(a, b, 4), std::nullopt);
  b[9] = std::byte{0x7f};
  EXPECT_FALSE(bitwise_equal(a, b));
  EXPECT_EQ(first_changed_element(a, b, 4), 2);
  EXPECT_FALSE(bitwise_equal(a, std::span(a).first(8)));
  EXPECT_EQ(first_changed_element(a, std::span(a).first(8), 4), 2);
  // -0.0 and +0.0 compare equal as numbers but not as bits.
  EXPECT_FALSE(bitwise_equal(bytes_of(std::vector<float>{0.0f}), bytes_of(std::vector<float>{-0.0f})));
}

TEST(Comparison, FormatsIndicesAndValues) {
  EXPECT_EQ(format_index(7, {2, 4}), "[1, 3]");
  EXPECT_EQ(format_index(0, {}), "[]");
  EXPECT_EQ(format_index(5, {0, 3}), "[5]");
  EXPECT_EQ(format_value(0.1f, DType::f32), "0.1");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(-kInf), "-inf");
  EXPECT_EQ(format_value(kNaN), "nan");
}

}  // namespace
}  // namespace kforge::evaluation

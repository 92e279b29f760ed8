#include "evaluation/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

std::vector<std::byte> bytes_of(const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

float to_tf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x0fffu + ((bits >> 13) & 1u);
  bits &= 0xffffe000u;
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

float to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

// Dot products of `rows` pairs of length k, normal inputs (which cancel), computed several ways.
struct Dots {
  std::vector<float> exact, fp32_serial, fp32_blocked, tf32, bf16, split_3xtf32;
};

Dots dots(int rows, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Dots d;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> a(k), b(k);
    for (int i = 0; i < k; ++i) {
      a[i] = normal(rng);
      b[i] = normal(rng);
    }
    double exact = 0.0;
    float serial = 0.0f, t = 0.0f, h = 0.0f, split = 0.0f;
    float lanes[8] = {};
    for (int i = 0; i < k; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      serial += a[i] * b[i];
      lanes[i % 8] += a[i] * b[i];
      t += to_tf32(a[i]) * to_tf32(b[i]);
      h += to_bf16(a[i]) * to_bf16(b[i]);
      const float ah = to_tf32(a[i]), bh = to_tf32(b[i]);
      const float al = to_tf32(a[i] - ah), bl = to_tf32(b[i] - bh);
      split += ah * bl + al * bh + ah * bh;
    }
    float blocked = 0.0f;
    for (float lane : lanes) blocked += lane;
    d.exact.push_back(static_cast<float>(exact));
    d.fp32_serial.push_back(serial);
    d.fp32_blocked.push_back(blocked);
    d.tf32.push_back(t);
    d.bf16.push_back(h);
    d.split_3xtf32.push_back(split);
  }
  return d;
}

PrecisionCheck check(const std::vector<float>& got, const Dots& d, double max_ratio = 8.0) {
  return check_precision(bytes_of(got), bytes_of(d.exact), bytes_of(d.fp32_serial),
                         static_cast<int64_t>(got.size()), max_ratio);
}

// The rule separates what it must at the reduction lengths of the gate and of KernelBench: fp32
// orders and the 3xTF32 split pass with room, TF32 and bf16 fail by far more than the margin.
TEST(PrecisionRule, SeparatesFp32AccurateOrdersFromTf32AndBf16) {
  for (int k : {31, 257, 4097}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const Dots d = dots(256, k, 1234 + k);
    EXPECT_TRUE(check(d.fp32_serial, d).passed);
    EXPECT_TRUE(check(d.fp32_blocked, d).passed);
    const PrecisionCheck split = check(d.split_3xtf32, d);
    EXPECT_TRUE(split.passed) << split.failure;
    const PrecisionCheck tf32 = check(d.tf32, d);
    EXPECT_FALSE(tf32.passed);
    EXPECT_GT(tf32.ratio, 50.0);  // the margin over max_ratio = 8 is large, not marginal
    EXPECT_NE(tf32.failure.find("below fp32 precision"), std::string::npos) << tf32.failure;
    EXPECT_FALSE(check(d.bf16, d).passed);
  }
}

TEST(PrecisionRule, ReportsBothErrorsAndTheRatio) {
  const Dots d = dots(64, 1024, 7);
  const PrecisionCheck tf32 = check(d.tf32, d);
  EXPECT_GT(tf32.model_rms_error, 0.0);
  EXPECT_NEAR(tf32.ratio, tf32.candidate_rms_error / tf32.model_rms_error, 1e-9);
  EXPECT_NEAR(tf32.allowed_rms_error,
              8.0 * tf32.model_rms_error + 4.0 * 0x1p-24 * tf32.reference_rms, 1e-12);
  // A larger max_ratio (the task's [fp32_model] max_ratio) admits more.
  EXPECT_TRUE(check(d.tf32, d, 1e6).passed);
}

TEST(PrecisionRule, WhereFp32IsExactTheToleranceAloneJudges) {
  // K = 1: a plain fp32 product is the float64 answer rounded, so the model errs nothing and a
  // ratio to it means nothing (an honest 3xTF32 product errs a few ulp of its terms). The rule
  // stands aside there, for TF32 too; the larger gate cases catch TF32.
  const Dots d = dots(256, 1, 99);
  const PrecisionCheck tf32 = check(d.tf32, d);
  EXPECT_FALSE(tf32.applied);
  EXPECT_TRUE(tf32.passed);
  EXPECT_TRUE(check(d.split_3xtf32, d).passed);
  // Once the model errs more than rounding, the rule applies and a candidate 4 ulp off passes
  // while one off by TF32's rounding does not.
  const std::vector<float> reference = {1.0f, -3.0f, 0.5f, 100.0f};
  std::vector<float> model, ulps_off, tf32_off;
  for (float v : reference) {
    model.push_back(v * (1.0f + 0x1p-22f));
    ulps_off.push_back(v * (1.0f + 0x1p-21f));
    tf32_off.push_back(v * (1.0f + 0x1p-11f));
  }
  const auto n = static_cast<int64_t>(reference.size());
  const PrecisionCheck near =
      check_precision(bytes_of(ulps_off), bytes_of(reference), bytes_of(model), n, 8.0);
  EXPECT_TRUE(near.applied);
  EXPECT_TRUE(near.passed) << near.failure;
  const PrecisionCheck off =
      check_precision(bytes_of(tf32_off), bytes_of(reference), bytes_of(model), n, 8.0);
  EXPECT_TRUE(off.applied);
  EXPECT_FALSE(off.passed);
  EXPECT_NE(off.failure.find("below fp32 precision"), std::string::npos) << off.failure;
}

TEST(PrecisionRule, IgnoresNonFiniteReferenceAndFailsNonFiniteCandidate) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> reference = {inf, 1.0f, 2.0f};
  const std::vector<float> model = {inf, 1.0f + 0x1p-20f, 2.0f};  // errs: the rule applies
  EXPECT_TRUE(check_precision(bytes_of({0.0f, 1.0f, 2.0f}), bytes_of(reference), bytes_of(model),
                              3, 8.0)
                  .passed);
  EXPECT_FALSE(check_precision(bytes_of({inf, std::nanf(""), 2.0f}), bytes_of(reference),
                               bytes_of(model), 3, 8.0)
                   .passed);
}

// An element that a cancelling sum leaves beyond a fixed tolerance passes when the candidate errs
// no more there than max_ratio times the fp32 model does; a wrong element does not.
TEST(PrecisionRule, AnElementBeyondTheToleranceIsJudgedByTheModelsErrorThere) {
  const std::vector<float> reference = {1.0f, -0.48279312f, 2.0f};
  const std::vector<float> model = {1.0f, -0.48272f, 2.0f};  // fp32 errs 7.3e-5 at element 1
  const double rtol = 1e-4, atol = 3.22e-5;                  // allows 8.0e-5 there
  // 9.3e-5 off: beyond the tolerance, within 8x the model's error.
  EXPECT_EQ(first_beyond_fp32_error(bytes_of({1.0f, -0.4826997f, 2.0f}), bytes_of(reference),
                                    bytes_of(model), 3, rtol, atol, 8.0, 0.0),
            -1);
  // 1e-3 off at element 1 (> 8 x 7.3e-5 + 8.0e-5), or 1e-3 off where the model is exact.
  EXPECT_EQ(first_beyond_fp32_error(bytes_of({1.0f, -0.4818f, 2.0f}), bytes_of(reference),
                                    bytes_of(model), 3, rtol, atol, 8.0, 0.0),
            1);
  EXPECT_EQ(first_beyond_fp32_error(bytes_of({1.0f, -0.4826997f, 2.001f}), bytes_of(reference),
                                    bytes_of(model), 3, rtol, atol, 8.0, 0.0),
            2);
  // A non-finite candidate element where the reference is finite is never within.
  EXPECT_EQ(first_beyond_fp32_error(bytes_of({std::nanf(""), -0.4826997f, 2.0f}),
                                    bytes_of(reference), bytes_of(model), 3, rtol, atol, 8.0, 0.0),
            0);
  EXPECT_THROW(first_beyond_fp32_error(bytes_of({1.0f}), bytes_of(reference), bytes_of(model), 3,
                                       rtol, atol, 8.0, 0.0),
               Error);
}

// The model can be lucky at the one element where the candidate is not: there the model's RMS
// error over the output is the floor of what fp32 errs, and a wrong element stays wrong.
TEST(PrecisionRule, AnElementWhereTheModelIsLuckyIsJudgedByTheModelsRmsError) {
  const std::vector<float> reference = {1.0f, -0.036651824f, 2.0f};
  const std::vector<float> model = {1.0f, -0.036651824f, 2.0f};  // exact at element 1
  const double rtol = 1e-4, atol = 1.61e-5;                      // allows 2.0e-5 there
  const std::vector<std::byte> got = bytes_of({1.0f, -0.03668817f, 2.0f});  // 3.6e-5 off
  EXPECT_EQ(first_beyond_fp32_error(got, bytes_of(reference), bytes_of(model), 3, rtol, atol, 8.0,
                                    0.0),
            1);
  EXPECT_EQ(first_beyond_fp32_error(got, bytes_of(reference), bytes_of(model), 3, rtol, atol, 8.0,
                                    4e-6),
            -1);
  // 1e-3 off is beyond 8 x 4e-6 + the tolerance.
  EXPECT_EQ(first_beyond_fp32_error(bytes_of({1.0f, -0.0356f, 2.0f}), bytes_of(reference),
                                    bytes_of(model), 3, rtol, atol, 8.0, 4e-6),
            1);
  EXPECT_THROW(first_beyond_fp32_error(got, bytes_of(reference), bytes_of(model), 3, rtol, atol,
                                       8.0, -1.0),
               Error);
}

TEST(PrecisionRule, RejectsShortSpansAndRatiosBelowOne) {
  const std::vector<std::byte> two = bytes_of({1.0f, 2.0f});
  EXPECT_THROW(check_precision(two, two, two, 3, 8.0), Error);
  EXPECT_THROW(check_precision(two, two, two, 2, 0.5), Error);
}

}  // namespace
}  // namespace kforge::evaluation

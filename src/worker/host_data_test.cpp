#include "worker/host_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

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

constexpr InputDistribution kDistributions[] = {
    InputDistribution::uniform, InputDistribution::normal, InputDistribution::heavy_tailed,
    InputDistribution::small,   InputDistribution::pareto, InputDistribution::spike};
constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};

std::vector<double> values_of(DType dtype, const std::vector<std::byte>& bytes) {
  std::vector<double> values(bytes.size() / static_cast<size_t>(dtype_size(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = element_as_double(dtype, bytes.data(), static_cast<int64_t>(i));
  }
  return values;
}

double fraction_of(const std::vector<double>& values, bool (*predicate)(double)) {
  return static_cast<double>(std::count_if(values.begin(), values.end(), predicate)) /
         static_cast<double>(values.size());
}

TEST(HostData, InputsAreDeterministicPerSeedTensorAndDistribution) {
  const auto a = make_input(DType::f32, 1000, 7, 0);
  EXPECT_EQ(a, make_input(DType::f32, 1000, 7, 0));
  EXPECT_EQ(a, make_input(DType::f32, 1000, 7, 0, InputDistribution::uniform));
  EXPECT_NE(a, make_input(DType::f32, 1000, 8, 0));
  EXPECT_NE(a, make_input(DType::f32, 1000, 7, 1));
  ASSERT_EQ(a.size(), 4000u);
  for (auto distribution : kDistributions) {
    const auto b = make_input(DType::f32, 1000, 7, 0, distribution);
    EXPECT_EQ(b, make_input(DType::f32, 1000, 7, 0, distribution));
    EXPECT_NE(b, make_input(DType::f32, 1000, 8, 0, distribution));
    EXPECT_NE(b, make_input(DType::f32, 1000, 7, 1, distribution));
    for (auto other : kDistributions) {
      if (other != distribution) {
        EXPECT_NE(b, make_input(DType::f32, 1000, 7, 0, other));
      }
    }
  }
}

TEST(HostData, InputsArePinnedAcrossVersions) {
  // Golden values: a change of generator would silently change every recorded experiment. The
  // uniform and integer values were also cross-checked against an independent Python
  // implementation of the SplitMix64 scheme that host_data.h documents.
  const auto expect_f32 = [](InputDistribution distribution, std::vector<float> expected) {
    const auto bytes = make_input(DType::f32, 3, 7, 0, distribution);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(element_as_double(DType::f32, bytes.data(), i), expected[i])
          << to_string(distribution) << " element " << i;
    }
  };
  expect_f32(InputDistribution::uniform, {0.421509534f, 0.159429356f, -0.240827724f});
  expect_f32(InputDistribution::normal, {0.178080469f, 0.062648356f, -0.142293066f});
  expect_f32(InputDistribution::heavy_tailed, {-0.665166974f, -0.00231920253f, 0.00156486954f});
  const auto ints = make_input(DType::i32, 3, 7, 1);
  EXPECT_EQ(element_as_double(DType::i32, ints.data(), 0), -10);
  EXPECT_EQ(element_as_double(DType::i32, ints.data(), 2), -9);
  // The whole f64 stream, every bit: catches fused multiply-adds or -ffast-math (host_data.cpp)
  // that change the last bits of some values but not the rounded f32 ones above.
  const uint64_t expected_digest[] = {0x5216cbfece91f34aull, 0xa70f276b3e323532ull,
                                      0xfba71dd65c367fa3ull, 0x0810904913263d81ull,
                                      0x790d67983e0d18daull, 0x96ed1888a030f800ull};
  for (auto distribution : kDistributions) {
    uint64_t digest = 0xcbf29ce484222325ull;  // FNV-1a
    for (std::byte b : make_input(DType::f64, 4096, 7, 0, distribution)) {
      digest = (digest ^ static_cast<uint8_t>(b)) * 0x100000001b3ull;
    }
    EXPECT_EQ(digest, expected_digest[static_cast<int>(distribution)]) << to_string(distribution);
  }
  // Beyond the ziggurat's base layer (3.654): the tail method of the slow path.
  const auto normal = make_input(DType::f64, 10'000, 7, 0, InputDistribution::normal);
  EXPECT_EQ(element_as_double(DType::f64, normal.data(), 7945), -3.768000901593068);
  EXPECT_EQ(element_as_double(DType::f64, normal.data(), 9965), 3.8207811036187831);
}

TEST(HostData, SmallInputsAreUniformScaledByTwoToTheMinusTen) {
  // Uniform draws (of their own stream) times 2^-10 exactly: magnitudes at which a norm's eps
  // (1e-5 or 1e-6) dominates the mean square, so a kernel with a wrong eps fails the gate.
  const auto small = make_input(DType::f64, 4096, 7, 0, InputDistribution::small);
  const std::vector<double> v = values_of(DType::f64, small);
  double mean_square = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_LE(std::abs(v[i]), 0x1p-10) << i;
    // On the 2^-62 grid (uniform's 2^-52 grid scaled by a power of two, not by 1e-3).
    EXPECT_EQ(std::ldexp(v[i], 62), std::floor(std::ldexp(v[i], 62))) << i;
    mean_square += v[i] * v[i] / static_cast<double>(v.size());
  }
  EXPECT_GT(mean_square, 2e-7);
  EXPECT_LT(mean_square, 4e-7);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const auto values = values_of(dtype, make_input(dtype, 4096, 7, 0, InputDistribution::small));
    for (double value : values) EXPECT_LE(std::abs(value), 0x1p-10) << to_string(dtype);
  }
}

TEST(HostData, DistributionNamesRoundTrip) {
  for (auto distribution : kDistributions) {
    EXPECT_EQ(parse_input_distribution(to_string(distribution)), distribution);
  }
  EXPECT_EQ(to_string(InputDistribution::heavy_tailed), "heavy_tailed");
  try {
    parse_input_distribution("gaussian");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'gaussian'"), std::string::npos) << message;
    EXPECT_NE(message.find("uniform, normal, heavy_tailed, small, pareto, spike"),
              std::string::npos)
        << message;
  }
}

TEST(HostData, SeedsCycleThroughDistributions) {
  EXPECT_EQ(distribution_for_case(0), InputDistribution::uniform);
  EXPECT_EQ(distribution_for_case(1), InputDistribution::normal);
  EXPECT_EQ(distribution_for_case(2), InputDistribution::heavy_tailed);
  EXPECT_EQ(distribution_for_case(3), InputDistribution::uniform);
  EXPECT_EQ(distribution_for_case(3001), InputDistribution::normal);
}

TEST(HostData, BytesDoNotDependOnThreadCountOrLength) {
  const int64_t elements = 100'003;  // odd, and not a multiple of any chunk size
  for (DType dtype : kDTypes) {
    for (auto distribution : kDistributions) {
      const auto expected = make_input(dtype, elements, 11, 2, distribution);
      for (int threads : {1, 2, 7}) {
        std::vector<std::byte> out(expected.size(), std::byte{0xFF});
        fill_input(out, dtype, 11, 2, distribution, threads);
        ASSERT_EQ(out, expected) << to_string(dtype) << " " << to_string(distribution) << " "
                                 << threads << " threads";
      }
      // Counter-based: a shorter tensor is a prefix of a longer one.
      const auto prefix = make_input(dtype, 999, 11, 2, distribution);
      ASSERT_TRUE(std::equal(prefix.begin(), prefix.end(), expected.begin()));
    }
  }
}

TEST(HostData, FillRejectsPartialElements) {
  std::vector<std::byte> out(10);
  EXPECT_THROW(fill_input(out, DType::f32, 1, 0, InputDistribution::uniform), Error);
}

bool is_zero(double v) { return v == 0; }
bool is_negative(double v) { return v < 0; }

/// ~1% exact zeros and about half negative, whatever the distribution and dtype.
void expect_zeros_and_signs(const std::vector<double>& values, const std::string& what) {
  const double zeros = fraction_of(values, is_zero);
  EXPECT_GT(zeros, 0.005) << what;
  EXPECT_LT(zeros, 0.02) << what;
  const double negatives = fraction_of(values, is_negative);
  EXPECT_GT(negatives, 0.4) << what;
  EXPECT_LT(negatives, 0.6) << what;
}

TEST(HostData, UniformStatistics) {
  const auto values =
      values_of(DType::f32, make_input(DType::f32, 1'000'000, 3, 0, InputDistribution::uniform));
  double sum = 0;
  for (double v : values) {
    ASSERT_GE(v, -1.0);
    ASSERT_LE(v, 1.0);
    sum += v;
  }
  EXPECT_LT(std::fabs(sum / 1e6), 0.01);
  EXPECT_LT(*std::min_element(values.begin(), values.end()), -0.999);
  EXPECT_GT(*std::max_element(values.begin(), values.end()), 0.999);
  expect_zeros_and_signs(values, "uniform");
}

TEST(HostData, NormalStatistics) {
  const auto values =
      values_of(DType::f32, make_input(DType::f32, 1'000'000, 3, 0, InputDistribution::normal));
  double sum = 0, sum_squares = 0, beyond_two = 0, nonzero = 0, largest = 0;
  for (double v : values) {
    if (v == 0) continue;  // the injected zeros are not part of the Gaussian
    ++nonzero;
    sum += v;
    sum_squares += v * v;
    beyond_two += std::fabs(v) > 2;
    largest = std::max(largest, std::fabs(v));
  }
  EXPECT_LT(std::fabs(sum / nonzero), 0.01);
  EXPECT_NEAR(std::sqrt(sum_squares / nonzero), 1.0, 0.01);
  EXPECT_NEAR(beyond_two / nonzero, 0.0455, 0.002);  // P(|z| > 2) of a standard normal
  EXPECT_GT(largest, 4.0);                             // the ziggurat's tail is reached
  expect_zeros_and_signs(values, "normal");
}

TEST(HostData, HeavyTailedStatistics) {
  const auto values = values_of(
      DType::f32, make_input(DType::f32, 1'000'000, 3, 0, InputDistribution::heavy_tailed));
  double largest = 0, smallest = 1e9, per_decade[6] = {}, nonzero = 0;
  for (double v : values) {
    if (v == 0) continue;
    ++nonzero;
    const double magnitude = std::fabs(v);
    largest = std::max(largest, magnitude);
    smallest = std::min(smallest, magnitude);
    per_decade[std::clamp(static_cast<int>(std::floor(std::log10(magnitude))) + 3, 0, 5)] += 1;
  }
  EXPECT_GT(largest, 100.0);
  EXPECT_LE(largest, 1e3);
  EXPECT_LT(smallest, 0.01);
  EXPECT_GE(smallest, 1e-3 * 0.9999);
  for (double count : per_decade) EXPECT_NEAR(count / nonzero, 1.0 / 6, 0.005);  // log-uniform
  expect_zeros_and_signs(values, "heavy_tailed");
}

TEST(HostData, ParetoHasACauchyLikeTailAtRandomPositions) {
  const auto values =
      values_of(DType::f64, make_input(DType::f64, 1'000'000, 3, 0, InputDistribution::pareto));
  double largest = 0, smallest = 1e30, nonzero = 0, beyond_ten = 0, beyond_thousand = 0;
  for (double v : values) {
    if (v == 0) continue;
    ++nonzero;
    const double magnitude = std::fabs(v);
    largest = std::max(largest, magnitude);
    smallest = std::min(smallest, magnitude);
    beyond_ten += magnitude > 10;
    beyond_thousand += magnitude > 1000;
  }
  // P(|x| > t) = 1 / (2t) beyond 1: far beyond heavy_tailed's bound of 1e3.
  EXPECT_NEAR(beyond_ten / nonzero, 0.05, 0.002);
  EXPECT_NEAR(beyond_thousand / nonzero, 5e-4, 1e-4);
  EXPECT_GT(largest, 1e4);
  EXPECT_LE(largest, 0x1p26);
  EXPECT_GE(smallest, 0x1p-26);
  expect_zeros_and_signs(values, "pareto");
  // Integers: +-65536/k, every magnitude in [1, 65536].
  for (double v : values_of(DType::i32, make_input(DType::i32, 100'000, 3, 0,
                                                   InputDistribution::pareto))) {
    EXPECT_LE(std::fabs(v), 65536);
  }
}

TEST(HostData, SpikesAreRareAndOutweighTheSmallValues) {
  const auto values =
      values_of(DType::f32, make_input(DType::f32, 1 << 20, 5, 0, InputDistribution::spike));
  double spikes = 0, small_sum = 0, spike_sum = 0;
  int64_t first_spike = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    const double magnitude = std::fabs(values[i]);
    if (magnitude >= 1024) {
      EXPECT_LT(magnitude, 2048);
      ++spikes;
      spike_sum += magnitude;
      if (first_spike < 0) first_spike = static_cast<int64_t>(i);
    } else {
      EXPECT_LE(magnitude, 0x1p-10);
      small_sum += magnitude;
    }
  }
  EXPECT_NEAR(spikes / static_cast<double>(values.size()), 1.0 / 4096, 0.3 / 4096);
  EXPECT_GT(spike_sum, 100 * small_sum);  // the few spikes carry the sum
  EXPECT_GT(first_spike, 0);
  expect_zeros_and_signs(values, "spike");
}

TEST(HostData, RemapsRepeatElementsOfTheSameTensor) {
  const int64_t rows = 5, cols = 40, n = rows * cols;
  const auto plain = make_input(DType::f32, n, 9, 1, InputDistribution::normal);
  const auto at = [](const std::vector<std::byte>& bytes, int64_t e) {
    return element_as_double(DType::f32, bytes.data(), e);
  };
  std::vector<std::byte> every(plain.size()), half(plain.size()), none(plain.size());
  fill_input_remapped(every, DType::f32, 9, 1, InputDistribution::normal,
                      InputRemap::every_16th, rows);
  fill_input_remapped(half, DType::f32, 9, 1, InputDistribution::normal, InputRemap::half_rows,
                      rows);
  fill_input_remapped(none, DType::f32, 9, 1, InputDistribution::normal, InputRemap::none, rows);
  EXPECT_EQ(none, plain);
  for (int64_t e = 0; e < n; ++e) {
    EXPECT_EQ(at(every, e), at(plain, e - e % 16)) << e;
    // rows 3 and 4 repeat rows 0 and 1; rows 0..2 are themselves.
    const int64_t row = e / cols;
    EXPECT_EQ(at(half, e), at(plain, row < 3 ? e : e - 3 * cols)) << e;
  }
  // The remapped bytes of other dtypes are the same elements of make_input.
  const auto halves = make_input(DType::f16, n, 9, 1, InputDistribution::pareto);
  std::vector<std::byte> remapped(halves.size());
  fill_input_remapped(remapped, DType::f16, 9, 1, InputDistribution::pareto,
                      InputRemap::every_16th, rows);
  for (int64_t e = 0; e < n; ++e) {
    EXPECT_EQ(std::memcmp(remapped.data() + 2 * e, halves.data() + 2 * (e - e % 16), 2), 0);
  }
  EXPECT_THROW(fill_input_remapped(remapped, DType::f16, 9, 1, InputDistribution::pareto,
                                   InputRemap::half_rows, 7),
               Error);
  EXPECT_EQ(parse_input_remap(to_string(InputRemap::half_rows)), InputRemap::half_rows);
  EXPECT_THROW(parse_input_remap("strided"), Error);
}

TEST(HostData, IntegerRanges) {
  for (DType dtype : {DType::i32, DType::i64}) {
    for (auto distribution : kDistributions) {
      const auto values = values_of(dtype, make_input(dtype, 200'000, 5, 1, distribution));
      const double limit = distribution == InputDistribution::heavy_tailed ? 1000
                           : distribution == InputDistribution::pareto     ? 65536
                           : distribution == InputDistribution::spike      ? 2047
                                                                           : 16;
      const bool reached = distribution != InputDistribution::spike;  // ~49 spikes: rarely 2047
      EXPECT_EQ(*std::min_element(values.begin(), values.end()) == -limit, reached);
      EXPECT_EQ(*std::max_element(values.begin(), values.end()) == limit, reached);
      EXPECT_GE(*std::min_element(values.begin(), values.end()), -limit);
      EXPECT_LE(*std::max_element(values.begin(), values.end()), limit);
      for (double v : values) ASSERT_EQ(v, std::round(v));
      expect_zeros_and_signs(values, to_string(dtype) + " " + to_string(distribution));
    }
  }
}

/// True when `bits` (widened by `widen`) is `value` rounded to nearest, ties to even.
bool is_rounded_once(double value, uint16_t bits, float (*widen)(uint16_t)) {
  const auto magnitude = static_cast<uint16_t>(bits & 0x7FFF);
  if (value != 0 && std::signbit(value) != ((bits & 0x8000) != 0)) return false;
  const double target = std::fabs(value);
  const double error = std::fabs(target - widen(magnitude));
  const double above = std::fabs(target - widen(static_cast<uint16_t>(magnitude + 1)));
  const double below = magnitude == 0 ? error + 1 : std::fabs(target - widen(magnitude - 1));
  if (error > above || error > below) return false;
  return (error != above && error != below) || (magnitude & 1) == 0;
}

TEST(HostData, NarrowFloatsAreTheDoubleValuesRoundedOnce) {
  for (auto distribution : kDistributions) {
    const int64_t n = 200'000;
    const auto wide = values_of(DType::f64, make_input(DType::f64, n, 9, 0, distribution));
    const auto f32 = make_input(DType::f32, n, 9, 0, distribution);
    const auto f16 = make_input(DType::f16, n, 9, 0, distribution);
    const auto bf16 = make_input(DType::bf16, n, 9, 0, distribution);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(element_as_double(DType::f32, f32.data(), i), static_cast<float>(wide[i]));
      uint16_t half = 0, brain = 0;
      std::memcpy(&half, f16.data() + 2 * i, 2);
      std::memcpy(&brain, bf16.data() + 2 * i, 2);
      if (std::fabs(wide[i]) >= 65520) {  // beyond f16's largest finite value, rounded: inf
        ASSERT_EQ(half & 0x7FFF, 0x7C00) << wide[i];  // (pareto reaches 2^26)
      } else {
        ASSERT_TRUE(is_rounded_once(wide[i], half, half_to_float)) << wide[i];
      }
      ASSERT_TRUE(is_rounded_once(wide[i], brain, bfloat16_to_float)) << wide[i];
      ASSERT_EQ(float_to_half(half_to_float(half)), half);  // exactly representable
      ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(brain)), brain);
    }
  }
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

#include "evaluation/self_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "common/error.h"
#include "worker/host_data.h"

namespace kforge::evaluation {
namespace {

/// Owns the bytes a SelfTestInput borrows: one input x (f32, uniform in [-1, 1]) and one output
/// y = f(x) of `output_dtype`, for `n` elements.
struct Case {
  std::vector<std::byte> x, y;
  SelfTestInput input;

  Case(const std::string& label, int64_t n, uint64_t seed, const std::function<double(double)>& f,
       DType output_dtype = DType::f32)
      : x(worker::make_input(DType::f32, n, seed, 0)),
        y(static_cast<size_t>(n * dtype_size(output_dtype))) {
    for (int64_t i = 0; i < n; ++i) {
      store_element(output_dtype, y.data(), i,
                    f(worker::element_as_double(DType::f32, x.data(), i)));
    }
    input.label = label;
    input.inputs.push_back({"x", DType::f32, {n}, x});
    input.expected_outputs.push_back({"y", output_dtype, {n}, y});
    input.tolerances.push_back(default_tolerance(output_dtype));
  }
};

/// Runs the self-test; `Case`s must outlive the call, hence the reference.
SelfTestReport run(const std::vector<const Case*>& cases) {
  std::vector<SelfTestInput> inputs;
  for (const Case* c : cases) inputs.push_back(c->input);
  return self_test_outputs(inputs);
}

bool flags(const SelfTestReport& report, const std::string& start) {
  for (const std::string& weakness : report.weaknesses) {
    if (weakness.rfind(start, 0) == 0) return true;
  }
  return false;
}

TEST(SelfTest, ANormalOutputHasNoWeakness) {
  Case a("small, seed 1", 4096, 1, [](double x) { return 2 * x + 0.5; });
  Case b("small, seed 2", 4096, 2, [](double x) { return 2 * x + 0.5; });
  SelfTestReport report = run({&a, &b});
  EXPECT_TRUE(report.reference_passes);
  EXPECT_TRUE(report.weaknesses.empty()) << report.weaknesses.front();
  ASSERT_EQ(report.cases.size(), 8u);
  EXPECT_EQ(report.cases[0].name, "all zeros");
  EXPECT_EQ(report.cases[0].label, "small, seed 1");
  EXPECT_FALSE(report.cases[0].passed);
  EXPECT_EQ(report.cases[0].detail.rfind("output 'y': element [0] is 0, expected", 0), 0u);
  EXPECT_EQ(report.cases[1].name, "constant");
  EXPECT_FALSE(report.cases[1].passed);
  EXPECT_EQ(report.cases[2].name, "first input");
  EXPECT_FALSE(report.cases[2].passed);
  EXPECT_EQ(report.cases[3].name, "reference");
  EXPECT_TRUE(report.cases[3].passed);
  EXPECT_EQ(report.cases[3].detail, "passes all 1 outputs");
}

TEST(SelfTest, ZerosAreFlaggedWhenEveryExpectedValueIsBelowAtol) {
  Case a("tiny 1", 1000, 1, [](double x) { return 5e-6 * x; });
  Case b("tiny 2", 1000, 2, [](double x) { return 5e-6 * x; });
  SelfTestReport report = run({&a, &b});
  EXPECT_TRUE(report.reference_passes);
  EXPECT_TRUE(flags(report, "an all-zeros output passes on every case"));
  EXPECT_TRUE(flags(report, "a constant output"));  // the mean is a near-zero constant
  EXPECT_FALSE(flags(report, "copying the first input"));
}

TEST(SelfTest, ZerosPassingOnOneCaseOnlyAreNoWeakness) {
  Case tiny("tiny", 1000, 1, [](double x) { return 5e-6 * x; });
  Case normal("normal", 1000, 2, [](double x) { return x * x; });
  SelfTestReport report = run({&tiny, &normal});
  EXPECT_TRUE(report.weaknesses.empty());
  EXPECT_TRUE(report.cases[0].passed);   // zeros on "tiny"
  EXPECT_FALSE(report.cases[4].passed);  // zeros on "normal"
}

TEST(SelfTest, AConstantIsFlaggedWhenTheExpectedOutputIsConstant) {
  Case a("one", 512, 1, [](double) { return 3.0; });
  Case b("two", 512, 2, [](double) { return 3.0; });
  SelfTestReport report = run({&a, &b});
  EXPECT_TRUE(report.reference_passes);
  ASSERT_EQ(report.weaknesses.size(), 1u);
  EXPECT_TRUE(flags(report, "a constant output (the mean of the expected values) passes"));
}

TEST(SelfTest, TheFirstInputIsFlaggedForAnIdentityLikeTask) {
  // Output = bf16(x): a copy converted to the output dtype passes exactly.
  Case a("one", 777, 1, [](double x) { return x; }, DType::bf16);
  Case b("two", 777, 2, [](double x) { return x; }, DType::bf16);
  SelfTestReport report = run({&a, &b});
  ASSERT_EQ(report.weaknesses.size(), 1u);
  EXPECT_TRUE(flags(report, "copying the first input into the output passes on every case"));
}

TEST(SelfTest, TheFirstInputIsCycledToTheOutputSize) {
  // y tiles x three times: a broadcast copy.
  Case a("tiled", 300, 1, [](double) { return 0.0; });
  a.input.inputs[0].shape = {100};
  for (int64_t i = 0; i < 300; ++i) {
    store_element(DType::f32, a.y.data(), i, worker::element_as_double(DType::f32, a.x.data(), i % 100));
  }
  SelfTestReport report = run({&a});
  EXPECT_TRUE(flags(report, "copying the first input"));
}

TEST(SelfTest, WithoutInputsTheCopyIsNotTried) {
  Case a("no inputs", 64, 1, [](double x) { return x; });
  a.input.inputs.clear();
  SelfTestReport report = run({&a});
  ASSERT_EQ(report.cases.size(), 3u);
  EXPECT_EQ(report.cases[2].name, "reference");
  EXPECT_TRUE(report.weaknesses.empty());
}

TEST(SelfTest, EveryOutputMustPassForACaseToPass) {
  // Output 1 is tiny (zeros pass), output 2 is not: zeros fail the case, and it says where.
  Case a("two outputs", 256, 1, [](double x) { return 1e-7 * x; });
  Case other("", 256, 2, [](double x) { return x + 2; });
  a.input.expected_outputs.push_back({"z", DType::f32, {256}, other.y});
  a.input.tolerances.push_back(default_tolerance(DType::f32));
  SelfTestReport report = run({&a});
  EXPECT_FALSE(report.cases[0].passed);
  EXPECT_EQ(report.cases[0].detail.rfind("output 'z': ", 0), 0u);
  EXPECT_TRUE(report.reference_passes);
  EXPECT_EQ(report.cases.back().detail, "passes all 2 outputs");
}

TEST(SelfTest, ReferenceMustPassEvenWithNaNAndInfinities) {
  Case a("special", 16, 1, [](double x) {
    return x > 0.5 ? std::numeric_limits<double>::quiet_NaN()
                   : x < -0.5 ? -std::numeric_limits<double>::infinity() : x;
  });
  SelfTestReport report = run({&a});
  EXPECT_TRUE(report.reference_passes);
}

/// A scalar "loss" y = mean(x) over n inputs, and a probe whose output is the mean of every
/// 16th element: what the reference gives on inputs remapped every_16th.
struct MeanCase {
  std::vector<std::byte> x, y, probe_y;
  SelfTestInput input;

  MeanCase(const std::string& label, int64_t n, worker::InputDistribution distribution,
           double atol)
      : x(worker::make_input(DType::f32, n, 11, 0, distribution)), y(4), probe_y(4) {
    double sum = 0, sampled = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = worker::element_as_double(DType::f32, x.data(), i);
      sum += v;
      sampled += v * (i % 16 == 0 ? 16 : 0);
    }
    store_element(DType::f32, y.data(), 0, sum / static_cast<double>(n));
    store_element(DType::f32, probe_y.data(), 0, sampled / static_cast<double>(n));
    input.label = label;
    input.inputs.push_back({"x", DType::f32, {n}, x});
    input.expected_outputs.push_back({"y", DType::f32, {1}, y});
    input.tolerances.push_back({1e-2, atol});
    input.probes.push_back({"every_16th", {probe_y}});
  }
};

TEST(SelfTest, AProbeThatPassesEverywhereIsAWeaknessAndOneThatFailsOnceIsNot) {
  // A signed mean near 0: the mean of a 16-fold subsample of 2^16 uniform values is ~0.009 off
  // (one sd), within atol = 0.05; on pareto values the largest few (~n/2) dominate the mean.
  const MeanCase uniform("uniform", 1 << 16, worker::InputDistribution::uniform, 0.05);
  const MeanCase pareto("pareto", 1 << 16, worker::InputDistribution::pareto, 0.05);
  SelfTestReport report = self_test_outputs({uniform.input});
  EXPECT_TRUE(flags(report, "the reference on inputs remapped every_16th passes on every case"))
      << (report.weaknesses.empty() ? "" : report.weaknesses.front());
  // A one-element output is its own mean: the constant is not tried, so not a weakness.
  EXPECT_FALSE(flags(report, "a constant output"));
  for (const SelfTestCase& c : report.cases) EXPECT_NE(c.name, "constant");
  ASSERT_EQ(report.cases.size(), 4u);  // zeros, first input, reference, the probe
  EXPECT_EQ(report.cases.back().name, "reference on every_16th inputs");
  EXPECT_TRUE(report.cases.back().passed);

  report = self_test_outputs({uniform.input, pareto.input});
  EXPECT_FALSE(report.cases.back().passed) << report.cases.back().detail;
  for (const std::string& weakness : report.weaknesses) {
    EXPECT_EQ(weakness.find("every_16th"), std::string::npos) << weakness;
  }
}

TEST(SelfTest, RefusesAProbeWithTheWrongOutputs) {
  MeanCase mean("uniform", 64, worker::InputDistribution::uniform, 0.05);
  mean.input.probes.front().outputs.clear();
  EXPECT_THROW(self_test_outputs({mean.input}), Error);
  MeanCase short_probe("uniform", 64, worker::InputDistribution::uniform, 0.05);
  short_probe.input.probes.front().outputs.front() =
      std::span<const std::byte>(short_probe.probe_y).first(2);
  EXPECT_THROW(self_test_outputs({short_probe.input}), Error);
}

TEST(SelfTest, RefusesMalformedInputs) {
  EXPECT_THROW(self_test_outputs({}), Error);
  Case a("a", 8, 1, [](double x) { return x; });
  a.input.tolerances.clear();
  EXPECT_THROW(run({&a}), Error);
  Case b("b", 8, 1, [](double x) { return x; });
  b.input.expected_outputs[0].shape = {9};
  EXPECT_THROW(run({&b}), Error);
  Case c("c", 8, 1, [](double x) { return x; });
  c.input.expected_outputs.clear();
  c.input.tolerances.clear();
  EXPECT_THROW(run({&c}), Error);
}

TEST(SelfTest, StoreElementRoundsAndSaturates) {
  std::vector<std::byte> buffer(16);
  auto stored = [&](DType dtype, double value) {
    store_element(dtype, buffer.data(), 1, value);
    return worker::element_as_double(dtype, buffer.data(), 1);
  };
  EXPECT_EQ(stored(DType::f32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(stored(DType::f64, 0.1), 0.1);
  EXPECT_EQ(stored(DType::f16, 1.0 + 1.0 / 4096), 1.0);  // below half a half-precision ulp
  EXPECT_EQ(stored(DType::bf16, 1.0 + 1.0 / 64), 1.015625);
  EXPECT_TRUE(std::isinf(stored(DType::f32, 1e300)));
  EXPECT_TRUE(std::isinf(stored(DType::f16, 1e6)));
  EXPECT_EQ(stored(DType::i32, 2.5), 3.0);
  EXPECT_EQ(stored(DType::i32, -7.4), -7.0);
  EXPECT_EQ(stored(DType::i32, 1e12), 2147483647.0);
  EXPECT_EQ(stored(DType::i32, -1e12), -2147483648.0);
  EXPECT_EQ(stored(DType::i32, std::nan("")), 0.0);
  EXPECT_EQ(stored(DType::i64, 1e30), 9223372036854775807.0);
  EXPECT_EQ(buffer[0], std::byte{0});  // element 0 of every dtype untouched
  EXPECT_EQ(buffer[1], std::byte{0});
}

}  // namespace
}  // namespace kforge::evaluation

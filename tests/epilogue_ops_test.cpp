// The element-wise ops of kernels/common/epilogue.h (host build): each against its PyTorch
// definition written out in double, over a grid that crosses every branch (negative, the
// hardswish knees at -3 and 3, softplus's threshold at 20); NaN passing through where PyTorch
// lets it; channel ops reading the output's channel; chains composed with `|`.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <common/epilogue.h>

namespace {

using kf::ep::Operands;

Operands operands_with(std::vector<float> scalars, std::vector<const float*> tensors = {}) {
  Operands o{};
  for (size_t i = 0; i < scalars.size(); ++i) o.v[i] = scalars[i];
  for (size_t i = 0; i < tensors.size(); ++i) o.t[i] = tensors[i];
  return o;
}

std::vector<double> grid() {
  std::vector<double> values;
  for (double v = -30.0; v <= 30.0; v += 0.0625) values.push_back(v);
  for (double v : {-3.0, 3.0, 20.0, 19.999, 20.001, 0.0, -0.0, 1e-6, -1e-6}) values.push_back(v);
  return values;
}

template <class Op>
void expect_matches(const std::string& name, Op op, const Operands& o,
                    const std::function<double(double)>& reference) {
  double worst = 0.0, worst_at = 0.0;
  for (double v : grid()) {
    const float x = static_cast<float>(v);
    const double want = reference(static_cast<double>(x));
    const double got = op(x, o, 0);
    // Relative to the result, with an absolute floor of the float spacing near 1.
    const double error = std::abs(got - want) / std::max(std::abs(want), 1.0);
    if (error > worst) worst = error, worst_at = v;
  }
  EXPECT_LT(worst, 4e-7) << name << ": worst relative error " << worst << " at " << worst_at;
}

double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }
double relu6(double v) { return std::min(std::max(v, 0.0), 6.0); }

TEST(EpilogueOps, EachMatchesItsPyTorchDefinition) {
  const Operands o = operands_with({0.7f});
  expect_matches("hardswish", kf::ep::Hardswish{}, o,
                 [](double v) { return v * relu6(v + 3.0) / 6.0; });
  expect_matches("hardsigmoid", kf::ep::Hardsigmoid{}, o,
                 [](double v) { return relu6(v + 3.0) / 6.0; });
  expect_matches("softplus", kf::ep::Softplus{}, o, softplus);
  expect_matches("mish", kf::ep::Mish{}, o, [](double v) { return v * std::tanh(softplus(v)); });
  expect_matches("elu", kf::ep::Elu{0}, o,
                 [](double v) { return v > 0.0 ? v : 0.7f * std::expm1(v); });
  expect_matches("selu", kf::ep::Selu{}, o, [](double v) {
    return 1.0507009873554804934 * (v > 0.0 ? v : 1.6732632423543772848 * std::expm1(v));
  });
  expect_matches("gelu", kf::ep::Gelu{}, o,
                 [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
  expect_matches("swish", kf::ep::Swish{}, o, [](double v) { return v / (1.0 + std::exp(-v)); });
  expect_matches("leaky_relu", kf::ep::LeakyRelu{0}, o,
                 [](double v) { return v < 0.0 ? v * 0.7f : v; });
}

TEST(EpilogueOps, ReluAndClampPassNaNThrough) {
  const Operands o = operands_with({-1.0f, 1.0f});
  EXPECT_TRUE(std::isnan(kf::ep::Relu{}(NAN, o, 0)));
  EXPECT_TRUE(std::isnan(kf::ep::ClampMin{0}(NAN, o, 0)));
  EXPECT_TRUE(std::isnan(kf::ep::ClampMax{1}(NAN, o, 0)));
}

TEST(EpilogueOps, ChannelOpsReadTheOutputsChannel) {
  const float shift[3] = {1.0f, -2.0f, 4.0f};
  const float scale[3] = {0.5f, 3.0f, -1.0f};
  const Operands o = operands_with({2.0f}, {shift, scale});
  const auto chain = kf::ep::Relu{} | kf::ep::AddChannel{0} | kf::ep::MulChannel{1} |
                     kf::ep::Div{0} | kf::ep::SubChannel{0} | kf::ep::DivChannel{1};
  for (int64_t ch = 0; ch < 3; ++ch) {
    for (float v : {-1.5f, 0.0f, 2.25f}) {
      const float want = ((std::max(v, 0.0f) + shift[ch]) * scale[ch] / 2.0f - shift[ch]) /
                         scale[ch];
      EXPECT_FLOAT_EQ(chain(v, o, ch), want) << "channel " << ch << ", v " << v;
    }
  }
}

TEST(EpilogueOps, BranchOpsCombineTheValueWithAChainOfIt) {
  const Operands o = operands_with({0.5f});
  const auto mish = kf::ep::MulBranch{kf::ep::Softplus{} | kf::ep::Tanh{}};
  const auto hardswish =
      kf::ep::MulBranch{kf::ep::Hardsigmoid{}};  // x * clamp((x + 3) / 6, 0, 1)
  const auto residual = kf::ep::AddBranch{kf::ep::Sigmoid{} | kf::ep::Mul{0}};
  for (float v : {-4.0f, -0.5f, 0.0f, 0.75f, 3.5f}) {
    EXPECT_FLOAT_EQ(mish(v, o, 0), kf::ep::Mish{}(v, o, 0)) << v;
    EXPECT_FLOAT_EQ(hardswish(v, o, 0), kf::ep::Hardswish{}(v, o, 0)) << v;
    EXPECT_FLOAT_EQ(residual(v, o, 0), v + 0.5f / (1.0f + std::exp(-v))) << v;
    EXPECT_FLOAT_EQ(kf::ep::RsubBranch{kf::ep::Sigmoid{}}(v, o, 0),
                    1.0f / (1.0f + std::exp(-v)) - v)
        << v;
    if (v != 0.0f) {
      EXPECT_FLOAT_EQ(kf::ep::RdivBranch{kf::ep::Tanh{}}(v, o, 0), std::tanh(v) / v) << v;
    }
  }
}

}  // namespace

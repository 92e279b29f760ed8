// The index math of grouped_conv's implicit GEMM (kernels/cuda/common/conv_implicit_gemm.h), run
// on the host the way kernels/cuda/grouped_conv/implicit_gemm_3xtf32.cu runs it: per block and
// thread, the output position's origin, the cursor placed once and then advanced kStep rows per
// copy across BK-deep slices, each B element read through tap_source (zero where it says so),
// a double-precision GEMM per group, and the stores at y_offset. The result must equal a direct
// convolution, every output must be written exactly once, and B must be 0 past K and past N.
// What this cannot check (the cp.async pipeline, the 3xTF32 MMAs, the fragment layout) is the
// gate's job on a GPU (kernel_families_test, label gpu).
#include <cuda/common/conv_implicit_gemm.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kf::conv_igemm {
namespace {

/// A convolution's shape: per dimension (depth, height, width) input extent, taps, stride,
/// padding, dilation.
struct Shape {
  int64_t n;
  int groups, cig, cog;
  int in[3], k[3], stride[3], pad[3], dil[3];
};

/// Tensors and the ConvArgs pointing at them (x [n, c, d, h, w], weight [co, cig, kd, kh, kw]).
struct Problem {
  ConvArgs c;
  std::vector<float> x, w;
};

Problem make_problem(const Shape& s, unsigned seed) {
  Problem pr;
  ConvArgs& c = pr.c;
  c.n = s.n;
  c.groups = s.groups;
  c.cig = s.cig;
  c.cog = s.cog;
  c.c = static_cast<int64_t>(s.groups) * s.cig;
  c.co = static_cast<int64_t>(s.groups) * s.cog;
  for (int i = 0; i < 3; ++i) {
    ConvDim& d = c.dim[i];
    d.in = s.in[i];
    d.k = s.k[i];
    d.stride = s.stride[i];
    d.pad = s.pad[i];
    d.dil = s.dil[i];
    d.out = conv_forward_extent(d.in, d.k, d.stride, d.pad, d.dil);
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  pr.x.resize(c.n * c.c * c.in_volume());
  pr.w.resize(c.co * c.cig * c.taps());
  for (float& v : pr.x) v = value(rng);
  for (float& v : pr.w) v = value(rng);
  c.x = pr.x.data();
  c.w = pr.w.data();
  return pr;
}

/// y of the direct convolution (conv_args.h's formula), in double.
std::vector<double> direct(const ConvArgs& c) {
  const ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  std::vector<double> y(c.n * c.co * c.out_volume(), 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.co; ++co)
      for (int64_t od = 0; od < dd.out; ++od)
        for (int64_t oh = 0; oh < dh.out; ++oh)
          for (int64_t ow = 0; ow < dw.out; ++ow) {
            const int64_t g = co / c.cog;
            double sum = 0.0;
            for (int ci = 0; ci < c.cig; ++ci)
              for (int kd = 0; kd < dd.k; ++kd)
                for (int kh = 0; kh < dh.k; ++kh)
                  for (int kw = 0; kw < dw.k; ++kw) {
                    const int64_t id = od * dd.stride - dd.pad + kd * dd.dil;
                    const int64_t ih = oh * dh.stride - dh.pad + kh * dh.dil;
                    const int64_t iw = ow * dw.stride - dw.pad + kw * dw.dil;
                    if (id < 0 || id >= dd.in || ih < 0 || ih >= dh.in || iw < 0 || iw >= dw.in)
                      continue;
                    const int64_t xi =
                        (((n * c.c + g * c.cig + ci) * dd.in + id) * dh.in + ih) * dw.in + iw;
                    const int64_t wi = (((co * c.cig + ci) * dd.k + kd) * dh.k + kh) * dw.k + kw;
                    sum += static_cast<double>(c.x[xi]) * c.w[wi];
                  }
            y[((n * c.co + co) * dd.out + od) * dh.out * dw.out + oh * dw.out + ow] = sum;
          }
  return y;
}

/// One block's B slice rows as the kernel gathers them: thread (row0, col) of a block of
/// kStep * bn threads places its cursor on the first slice and advances it kStep rows per copy.
/// Returns B [ktiles * bk][bn]; `outside_x` counts sources that left x.
template <int kStep>
std::vector<double> gather_block(const Plan& p, int group, int64_t bn0, int bn, int bk, int ktiles,
                                 int& outside_x) {
  std::vector<double> b(static_cast<size_t>(ktiles) * bk * bn, 0.0);
  const float* x_end = p.c.x + p.c.n * p.c.c * p.c.in_volume();
  for (int row0 = 0; row0 < kStep; ++row0)
    for (int col = 0; col < bn; ++col) {
      const Origin origin = origin_of(p, bn0 + col, group);
      Cursor cursor;
      for (int kt = 0; kt < ktiles; ++kt) {
        const int k0 = kt * bk;
        if (cursor.k != k0 + row0) cursor = seek(p, k0 + row0);
        for (int j = 0; j < bk / kStep; ++j) {
          const int k = k0 + row0 + j * kStep;
          EXPECT_EQ(cursor.k, k);
          const float* src = nullptr;
          const bool inside = tap_source(p, origin, cursor, src);
          if (src < p.c.x || src >= x_end) ++outside_x;
          if (!inside) EXPECT_EQ(src, p.c.x);
          if (inside && src >= p.c.x && src < x_end) b[static_cast<size_t>(k) * bn + col] = *src;
          advance<kStep>(p, cursor);
        }
      }
    }
  return b;
}

/// The kernel's computation with kStep = 256 / BN gather rows per copy and BK-deep slices:
/// y, NaN where no block stored. Checks B's zero tails and that each output is stored once.
template <int kStep>
std::vector<double> implicit_gemm(const ConvArgs& c, int bm, int bk) {
  constexpr int kBn = 256 / kStep;
  Plan p;
  p.c = c;
  EXPECT_TRUE(plan(p, bm, kBn));
  std::vector<double> y(c.n * c.co * c.out_volume(), std::nan(""));
  std::vector<int> stores(y.size(), 0);
  const int ktiles = (p.k_total + bk - 1) / bk;
  int outside_x = 0;
  for (int group = 0; group < c.groups; ++group)
    for (int64_t bn0 = 0; bn0 < p.positions; bn0 += kBn) {
      const std::vector<double> b = gather_block<kStep>(p, group, bn0, kBn, bk, ktiles, outside_x);
      for (int64_t k = p.k_total; k < static_cast<int64_t>(ktiles) * bk; ++k)
        for (int col = 0; col < kBn; ++col) EXPECT_EQ(b[k * kBn + col], 0.0) << "k " << k;
      for (int col = 0; col < kBn; ++col) {
        const int64_t position = bn0 + col;
        if (position >= p.positions) {
          for (int64_t k = 0; k < p.k_total; ++k) EXPECT_EQ(b[k * kBn + col], 0.0);
          continue;
        }
        const int64_t at = y_offset(p, position, group);
        for (int m = 0; m < c.cog; ++m) {
          const float* a = c.w + (static_cast<int64_t>(group) * c.cog + m) * p.k_total;
          double sum = 0.0;
          for (int64_t k = 0; k < p.k_total; ++k)
            sum += static_cast<double>(a[k]) * b[k * kBn + col];
          const int64_t index = at + static_cast<int64_t>(m) * p.out_volume;
          y[index] = sum;
          ++stores[index];
        }
      }
    }
  EXPECT_EQ(outside_x, 0) << "a copy's source left x";
  for (size_t i = 0; i < stores.size(); ++i) EXPECT_EQ(stores[i], 1) << "output " << i;
  return y;
}

void expect_matches_direct(const Shape& s) {
  const Problem pr = make_problem(s, 7);
  const std::vector<double> want = direct(pr.c);
  for (const int bk : {16, 32}) {
    SCOPED_TRACE(testing::Message() << "BK " << bk);
    const std::vector<double> bn64 = implicit_gemm<4>(pr.c, 64, bk);
    const std::vector<double> bn128 = implicit_gemm<2>(pr.c, 128, bk);
    ASSERT_EQ(bn64.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(bn64[i], want[i], 1e-9) << "BN 64, output " << i;
      ASSERT_NEAR(bn128[i], want[i], 1e-9) << "BN 128, output " << i;
    }
  }
}

// examples/conv3d_bias_relu's gate shapes: groups 2, stride (2, 1, 3), padding (1, 2, 0),
// dilation (1, 2, 1), taps (3, 3, 2): every dimension differs.
TEST(ConvImplicitGemm, GathersTheGroupedStridedPaddedDilatedConvolution) {
  const Shape odd{3, 2, 3, 5, {5, 7, 9}, {3, 3, 2}, {2, 1, 3}, {1, 2, 0}, {1, 2, 1}};
  const Shape channels{2, 2, 17, 3, {3, 4, 33}, {3, 3, 2}, {2, 1, 3}, {1, 2, 0}, {1, 2, 1}};
  const Shape single{1, 2, 1, 1, {1, 1, 2}, {3, 3, 2}, {2, 1, 3}, {1, 2, 0}, {1, 2, 1}};
  for (const Shape& s : {odd, channels, single}) {
    SCOPED_TRACE(testing::Message() << "cig " << s.cig << ", cog " << s.cog);
    expect_matches_direct(s);
  }
}

// KernelBench L2/1's form at a small size (3x3, 64 channels in: K = 576, a multiple of both BKs;
// 10 x 12 input: N = 2 * 80, not a multiple of BN), and taps fewer than the cursor's step (1x1,
// 2x1: several carries per advance).
TEST(ConvImplicitGemm, GathersDenseAndPointwiseConvolutions) {
  const Shape l2_1{2, 1, 64, 9, {1, 10, 12}, {1, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
  const Shape pointwise{2, 3, 5, 2, {1, 3, 5}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
  const Shape tall{1, 1, 3, 4, {2, 6, 4}, {1, 2, 1}, {1, 2, 1}, {0, 1, 1}, {1, 3, 1}};
  for (const Shape& s : {l2_1, pointwise, tall}) {
    SCOPED_TRACE(testing::Message() << "cig " << s.cig << ", cog " << s.cog);
    expect_matches_direct(s);
  }
}

// The cursor advanced row by row is the cursor seek places, for every k up to and past K.
TEST(ConvImplicitGemm, AdvancingTheCursorEqualsSeeking) {
  const Problem pr =
      make_problem({1, 1, 4, 1, {3, 3, 3}, {3, 2, 1}, {1, 1, 1}, {1, 0, 0}, {1, 1, 1}}, 1);
  Plan p;
  p.c = pr.c;
  ASSERT_TRUE(plan(p, 64, 64));
  ASSERT_EQ(p.k_total, 4 * 6);
  for (int start = 0; start < 3; ++start) {
    Cursor cur = seek(p, start);
    for (int k = start; k < p.k_total + 8; k += 3, advance<3>(p, cur)) {
      const Cursor want = seek(p, k);
      ASSERT_EQ(cur.k, k);
      EXPECT_EQ(cur.ci_offset, want.ci_offset) << k;
      EXPECT_EQ(cur.kd, want.kd) << k;
      EXPECT_EQ(cur.kh, want.kh) << k;
      EXPECT_EQ(cur.kw, want.kw) << k;
    }
  }
}

// plan() refuses what the grid or the int offsets cannot hold.
TEST(ConvImplicitGemm, PlanRefusesGridsAndOffsetsPastTheLimits) {
  Problem pr = make_problem({1, 1, 2, 3, {1, 4, 4}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}}, 1);
  Plan p;
  p.c = pr.c;
  ASSERT_TRUE(plan(p, 128, 64));
  EXPECT_EQ(p.positions, 16);
  EXPECT_EQ(p.k_total, 18);
  EXPECT_EQ(p.in_volume, 16);
  EXPECT_EQ(p.out_volume, 16);
  Plan many_groups = p;
  many_groups.c.groups = 65536;  // grid.z
  EXPECT_FALSE(plan(many_groups, 128, 64));
  Plan many_channels = p;
  many_channels.c.cog = 65536 * 64 + 1;  // grid.y at BM 64
  EXPECT_FALSE(plan(many_channels, 64, 64));
  EXPECT_TRUE(plan(many_channels, 128, 64));
  Plan big_slice = p;
  big_slice.c.cig = 1 << 27;  // cig * d*h*w = 2^31: int offsets in the slice
  EXPECT_FALSE(plan(big_slice, 128, 64));
}

}  // namespace
}  // namespace kf::conv_igemm

// Grouped forward convolution (cpu), row form: per output row (n, group, channel tile, od, oh)
// every valid (ci, kd, kh) input row is swept once per width tap kw, adding
// x_row[ow * stride_w + kw * dilation_w - padding_w] * weight[co, ci, kd, kh, kw] to the row's
// CO_TILE x ow accumulators over the range of ow whose input lies inside the row (found once per
// tap, so the inner loop tests nothing). With stride_w == 1 the loads are a contiguous run
// (vectorized, omp simd); otherwise strided loads. The accumulators live in a per-thread buffer.
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow]
// (common/conv_args.h). PARALLEL = 1 spreads rows over OpenMP threads. fp32 products and sums;
// each output sums in the order ci, kd, kh, kw; the epilogue (KF_EPILOGUE) at the store.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <kforge/kernel.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_CO_TILE
#define KF_CO_TILE 4
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_CO_TILE >= 1 && KF_CO_TILE <= 16, "CO_TILE is 1..16");

namespace {

// The input index that tap k of dimension `d` reads for output o, or -1 outside [0, in).
int64_t source(const kf::ConvDim& d, int64_t o, int k) {
  const int64_t i = o * d.stride - d.pad + static_cast<int64_t>(k) * d.dil;
  return i >= 0 && i < d.in ? i : -1;
}

// acc[j][ow] += xr[ow * stride + offset] * wv[j] for every ow in [0, out) whose input index lies
// in [0, in).
template <int CT>
void gather_row(const float* xr, int64_t in, int64_t out, int64_t stride, int64_t offset,
                const float (&wv)[CT], int tn, float* acc) {
  // first ow with ow * stride + offset >= 0, and one past the last with it < in
  const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t room = in - offset;  // ow * stride < room
  const int64_t hi = room <= 0 ? 0 : std::min<int64_t>(out, (room + stride - 1) / stride);
  for (int j = 0; j < tn; ++j) {
    float* row = acc + j * out;
    const float v = wv[j];
    if (stride == 1) {
      const float* xs = xr + offset;
#pragma omp simd
      for (int64_t ow = lo; ow < hi; ++ow) row[ow] += xs[ow] * v;
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) row[ow] += xr[ow * stride + offset] * v;
    }
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_forward_args(args, c); code != 0) return code;
  constexpr int CT = KF_CO_TILE;
  const auto epilogue = KF_EPILOGUE;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  const int tiles_per_group = (c.cog + CT - 1) / CT;
  const int64_t rows = c.n * c.groups * tiles_per_group * dd.out * dh.out;
  const int64_t in_volume = c.in_volume(), in_plane = dh.in * dw.in;
  const int taps = c.taps();
  const int64_t channel_stride = static_cast<int64_t>(c.cig) * taps;  // weight[co + 1] - weight[co]
#pragma omp parallel if (KF_PARALLEL)
  {
    std::vector<float> acc(static_cast<size_t>(CT) * dw.out);
#pragma omp for schedule(dynamic, 4)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t oh = row % dh.out;
      const int64_t od = row / dh.out % dd.out;
      const int tile = static_cast<int>(row / (dh.out * dd.out) % tiles_per_group);
      const int group = static_cast<int>(row / (dh.out * dd.out * tiles_per_group) % c.groups);
      const int64_t n = row / (dh.out * dd.out * tiles_per_group * c.groups);
      const int j0 = tile * CT, tn = std::min(CT, c.cog - j0);
      const int64_t co0 = static_cast<int64_t>(group) * c.cog + j0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int ci = 0; ci < c.cig; ++ci) {
        const float* xc = c.x + (n * c.c + static_cast<int64_t>(group) * c.cig + ci) * in_volume;
        const float* wc = c.w + co0 * channel_stride + static_cast<int64_t>(ci) * taps;
        for (int kd = 0; kd < dd.k; ++kd) {
          const int64_t id = source(dd, od, kd);
          if (id < 0) continue;
          for (int kh = 0; kh < dh.k; ++kh) {
            const int64_t ih = source(dh, oh, kh);
            if (ih < 0) continue;
            const float* xr = xc + id * in_plane + ih * dw.in;
            for (int kw = 0; kw < dw.k; ++kw) {
              float wv[CT] = {};
              const int tap = (kd * dh.k + kh) * dw.k + kw;
              for (int j = 0; j < tn; ++j) wv[j] = wc[j * channel_stride + tap];
              const int64_t offset = static_cast<int64_t>(kw) * dw.dil - dw.pad;
              gather_row<CT>(xr, dw.in, dw.out, dw.stride, offset, wv, tn, acc.data());
            }
          }
        }
      }
      for (int j = 0; j < tn; ++j) {
        const int64_t co = co0 + j;
        const float bias = c.bias ? c.bias[co] : 0.0f;
        float* yr = c.y + (((n * c.co + co) * dd.out + od) * dh.out + oh) * dw.out;
        const float* ar = acc.data() + static_cast<size_t>(j) * dw.out;
        for (int64_t ow = 0; ow < dw.out; ++ow) yr[ow] = epilogue(ar[ow] + bias, c.operands, co);
      }
    }
  }
  return 0;
}

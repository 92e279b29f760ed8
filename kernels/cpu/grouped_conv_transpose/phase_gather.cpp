// Grouped transposed convolution (cpu), phase-decomposed gather, the cpu twin of
// kernels/cuda/grouped_conv_transpose/phase_gather.cu with the same index arithmetic: the output
// is split into its stride_h x stride_w phases (outputs o = r + stride * t of one residue r share
// their taps and read inputs t + off(tap), off = floor((r + padding - tap * dilation) / stride)),
// so each (n, channel tile, od, phase) is a dense stride-1 gather with no per-element tap test:
// per contributing input row, every width tap adds a contiguous run of inputs to a contiguous
// run of the phase's accumulators (vectorizable). PARALLEL = 1 spreads (n, group, tile, od,
// phase) over OpenMP threads. fp32 products and sums; each output sums in the order ci, kd, kh,
// kw. Sub-pixel view: Shi et al. 2016, "Is the deconvolution layer the same as a convolutional
// layer?"; Dumoulin & Visin 2016, section 4.6.
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

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Taps of dimension `d` valid for phase r, with their offsets (input = t + off); returns count.
int phase_taps(const kf::ConvDim& d, int64_t r, std::vector<int>& taps,
               std::vector<int64_t>& off) {
  taps.clear();
  off.clear();
  for (int k = 0; k < d.k; ++k) {
    const int64_t num = r + d.pad - static_cast<int64_t>(k) * d.dil;
    if (((num % d.stride) + d.stride) % d.stride != 0) continue;
    taps.push_back(k);
    off.push_back(floor_div(num, d.stride));
  }
  return static_cast<int>(taps.size());
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_transpose_args(args, c); code != 0) return code;
  constexpr int CT = KF_CO_TILE;
  const auto epilogue = KF_EPILOGUE;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  const int tiles = (c.cog + CT - 1) / CT;
  const int64_t jobs = c.n * c.groups * tiles * dd.out * dh.stride * dw.stride;
  const int64_t in_volume = c.in_volume(), in_plane = dh.in * dw.in;
  const int taps = c.taps();
#pragma omp parallel if (KF_PARALLEL)
  {
    std::vector<int> kd_tap, kh_tap, kw_tap;
    std::vector<int64_t> d_off, h_off, w_off;
    std::vector<float> acc;
#pragma omp for schedule(dynamic, 1)
    for (int64_t job = 0; job < jobs; ++job) {
      int64_t b = job;
      const int rw = static_cast<int>(b % dw.stride);
      b /= dw.stride;
      const int rh = static_cast<int>(b % dh.stride);
      b /= dh.stride;
      const int64_t od = b % dd.out;
      b /= dd.out;
      const int tile = static_cast<int>(b % tiles);
      b /= tiles;
      const int group = static_cast<int>(b % c.groups);
      const int64_t n = b / c.groups;
      const int64_t cnt_h = rh < dh.out ? (dh.out - rh + dh.stride - 1) / dh.stride : 0;
      const int64_t cnt_w = rw < dw.out ? (dw.out - rw + dw.stride - 1) / dw.stride : 0;
      if (cnt_h == 0 || cnt_w == 0) continue;
      const int j0 = tile * CT, tn = std::min(CT, c.cog - j0);
      const int nd = phase_taps(dd, od % dd.stride, kd_tap, d_off);
      const int nh = phase_taps(dh, rh, kh_tap, h_off);
      const int nw = phase_taps(dw, rw, kw_tap, w_off);
      acc.assign(static_cast<size_t>(CT) * cnt_h * cnt_w, 0.0f);
      for (int ci = 0; ci < c.cig; ++ci) {
        const int64_t channel = static_cast<int64_t>(group) * c.cig + ci;
        const float* xc = c.x + (n * c.c + channel) * in_volume;
        const float* wc = c.w + (channel * c.cog + j0) * taps;
        for (int a = 0; a < nd; ++a) {
          const int64_t id = od / dd.stride + d_off[a];
          if (id < 0 || id >= dd.in) continue;
          for (int bh = 0; bh < nh; ++bh) {
            // phase rows t_h whose input row t_h + h_off is inside the input
            const int64_t h_lo = std::max<int64_t>(0, -h_off[bh]);
            const int64_t h_hi = std::min<int64_t>(cnt_h, dh.in - h_off[bh]);
            for (int e = 0; e < nw; ++e) {
              const int tap = (kd_tap[a] * dh.k + kh_tap[bh]) * dw.k + kw_tap[e];
              const int64_t w_lo = std::max<int64_t>(0, -w_off[e]);
              const int64_t w_hi = std::min<int64_t>(cnt_w, dw.in - w_off[e]);
              if (w_lo >= w_hi) continue;
              for (int j = 0; j < tn; ++j) {
                const float wv = wc[static_cast<int64_t>(j) * taps + tap];
                for (int64_t th = h_lo; th < h_hi; ++th) {
                  const float* xr = xc + id * in_plane + (th + h_off[bh]) * dw.in + w_off[e];
                  float* ar = acc.data() + (static_cast<size_t>(j) * cnt_h + th) * cnt_w;
#pragma omp simd
                  for (int64_t t = w_lo; t < w_hi; ++t) ar[t] += xr[t] * wv;
                }
              }
            }
          }
        }
      }
      const int64_t out_plane = dh.out * dw.out;
      for (int j = 0; j < tn; ++j) {
        const int64_t co = static_cast<int64_t>(group) * c.cog + j0 + j;
        const float bias = c.bias ? c.bias[co] : 0.0f;
        float* yp = c.y + ((n * c.co + co) * dd.out + od) * out_plane;
        const float* ap = acc.data() + static_cast<size_t>(j) * cnt_h * cnt_w;
        for (int64_t th = 0; th < cnt_h; ++th) {
          for (int64_t t = 0; t < cnt_w; ++t) {
            yp[(rh + dh.stride * th) * dw.out + rw + dw.stride * t] =
                epilogue(ap[th * cnt_w + t] + bias, c.operands, co);
          }
        }
      }
    }
  }
  return 0;
}

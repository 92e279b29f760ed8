// Grouped forward convolution (cpu), direct gather: each output element sums its group's input
// channels over the taps whose input lies inside x (common/conv_args.h has the formula), CO_TILE
// output channels of one group at a time so that every x value loaded is used CO_TILE times.
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow].
// The valid taps per dimension, and the input index each reads (o * stride - padding + k *
// dilation), are found once per output depth slice (depth), per output row (height) and per
// output element (width), so the inner loops test nothing. PARALLEL = 1 spreads (n, group,
// channel tile, od) jobs over OpenMP threads. fp32 products and sums, in the order ci, kd, kh, kw;
// the epilogue (KF_EPILOGUE) at the store.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <kforge/kernel.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif
#ifndef KF_CO_TILE
#define KF_CO_TILE 4
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");
static_assert(KF_CO_TILE >= 1 && KF_CO_TILE <= 16, "CO_TILE is 1..16");

namespace {

constexpr int kMaxTaps = 64;  // per dimension; larger kernels return -6

// Taps of dimension `d` whose input index for output o lies in [0, in), and those indices;
// returns the count.
int valid_taps(const kf::ConvDim& d, int64_t o, int* taps, int64_t* inputs) {
  int count = 0;
  const int64_t origin = o * d.stride - d.pad;
  for (int k = 0; k < d.k; ++k) {
    const int64_t i = origin + static_cast<int64_t>(k) * d.dil;
    if (i < 0 || i >= d.in) continue;
    taps[count] = k;
    inputs[count++] = i;
  }
  return count;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_forward_args(args, c); code != 0) return code;
  for (const kf::ConvDim& d : c.dim) {
    if (d.k > kMaxTaps) return -6;
  }
  constexpr int CT = KF_CO_TILE;
  const auto epilogue = KF_EPILOGUE;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  const int tiles_per_group = (c.cog + CT - 1) / CT;
  const int64_t jobs = c.n * c.groups * tiles_per_group * dd.out;
  const int64_t in_volume = c.in_volume(), in_plane = dh.in * dw.in;
  const int64_t out_plane = dh.out * dw.out;
  const int taps = c.taps(), kh_kw = dh.k * dw.k;
#pragma omp parallel for schedule(dynamic, 1) if (KF_PARALLEL)
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t od = job % dd.out;
    const int tile = static_cast<int>(job / dd.out % tiles_per_group);
    const int group = static_cast<int>(job / (dd.out * tiles_per_group) % c.groups);
    const int64_t n = job / (dd.out * tiles_per_group * c.groups);
    const int j0 = tile * CT, tn = std::min(CT, c.cog - j0);
    const int64_t co0 = static_cast<int64_t>(group) * c.cog + j0;
    const float* xg = c.x + (n * c.c + static_cast<int64_t>(group) * c.cig) * in_volume;
    const float* wg = c.w + co0 * c.cig * taps;  // weight[co0, 0, 0, 0, 0]
    int kd_tap[kMaxTaps], kh_tap[kMaxTaps], kw_tap[kMaxTaps];
    int64_t id_of[kMaxTaps], ih_of[kMaxTaps], iw_of[kMaxTaps];
    const int nd = valid_taps(dd, od, kd_tap, id_of);
    for (int64_t oh = 0; oh < dh.out; ++oh) {
      const int nh = valid_taps(dh, oh, kh_tap, ih_of);
      for (int64_t ow = 0; ow < dw.out; ++ow) {
        const int nw = valid_taps(dw, ow, kw_tap, iw_of);
        float acc[CT] = {};
        for (int ci = 0; ci < c.cig; ++ci) {
          const float* xc = xg + ci * in_volume;
          const float* wc = wg + static_cast<int64_t>(ci) * taps;
          for (int a = 0; a < nd; ++a) {
            for (int b = 0; b < nh; ++b) {
              const float* xr = xc + id_of[a] * in_plane + ih_of[b] * dw.in;
              const float* wr = wc + kd_tap[a] * kh_kw + kh_tap[b] * dw.k;
              for (int e = 0; e < nw; ++e) {
                const float xv = xr[iw_of[e]];
                for (int j = 0; j < CT; ++j) {
                  // weight[co0 + j, ci, kd, kh, kw]: channels cig * taps floats apart
                  if (j < tn) acc[j] += xv * wr[static_cast<int64_t>(j) * c.cig * taps + kw_tap[e]];
                }
              }
            }
          }
        }
        for (int j = 0; j < tn; ++j) {
          const int64_t co = co0 + j;
          const float bias = c.bias ? c.bias[co] : 0.0f;
          c.y[(n * c.co + co) * dd.out * out_plane + od * out_plane + oh * dw.out + ow] =
              epilogue(acc[j] + bias, c.operands, co);
        }
      }
    }
  }
  return 0;
}

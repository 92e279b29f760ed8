// Grouped transposed convolution (cpu), gather form: each output element sums the input elements
// and taps that reach it (common/conv_args.h has the formula), CO_TILE output channels of one
// group at a time so that every x value loaded is used CO_TILE times. The valid taps per
// dimension are found once per output row (depth, height) and per output element (width): only
// taps with (o + padding - k * dilation) on the stride grid and inside the input contribute.
// PARALLEL = 1 spreads (n, channel tile, od) over OpenMP threads. fp32 products and sums, in the
// order ci, kd, kh, kw.
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

// Taps of dimension `d` that reach output o, and the input index each reads; returns the count.
int valid_taps(const kf::ConvDim& d, int64_t o, int* taps, int64_t* inputs) {
  int count = 0;
  for (int k = 0; k < d.k; ++k) {
    const int64_t num = o + d.pad - static_cast<int64_t>(k) * d.dil;
    if (num < 0 || num % d.stride != 0 || num / d.stride >= d.in) continue;
    taps[count] = k;
    inputs[count++] = num / d.stride;
  }
  return count;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_transpose_args(args, c); code != 0) return code;
  for (const kf::ConvDim& d : c.dim) {
    if (d.k > kMaxTaps) return -6;
  }
  constexpr int CT = KF_CO_TILE;
  const auto epilogue = KF_EPILOGUE;
  const int tiles_per_group = (c.cog + CT - 1) / CT;
  const int64_t jobs = c.n * c.groups * tiles_per_group * c.dim[0].out;
  const int64_t in_volume = c.in_volume();
  const int64_t in_plane = c.dim[1].in * c.dim[2].in;
  const int taps = c.taps(), kh_kw = c.dim[1].k * c.dim[2].k;
#pragma omp parallel for schedule(dynamic, 1) if (KF_PARALLEL)
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t od = job % c.dim[0].out;
    const int tile = static_cast<int>(job / c.dim[0].out % tiles_per_group);
    const int group = static_cast<int>(job / (c.dim[0].out * tiles_per_group) % c.groups);
    const int64_t n = job / (c.dim[0].out * tiles_per_group * c.groups);
    const int j0 = tile * CT, tn = std::min(CT, c.cog - j0);
    int kd_tap[kMaxTaps], kh_tap[kMaxTaps], kw_tap[kMaxTaps];
    int64_t id_of[kMaxTaps], ih_of[kMaxTaps], iw_of[kMaxTaps];
    const int nd = valid_taps(c.dim[0], od, kd_tap, id_of);
    for (int64_t oh = 0; oh < c.dim[1].out; ++oh) {
      const int nh = valid_taps(c.dim[1], oh, kh_tap, ih_of);
      for (int64_t ow = 0; ow < c.dim[2].out; ++ow) {
        const int nw = valid_taps(c.dim[2], ow, kw_tap, iw_of);
        float acc[CT] = {};
        for (int ci = group * c.cig; ci < (group + 1) * c.cig; ++ci) {
          const float* xc = c.x + (n * c.c + ci) * in_volume;
          const float* wc = c.w + (static_cast<int64_t>(ci) * c.cog + j0) * taps;
          for (int a = 0; a < nd; ++a) {
            for (int b = 0; b < nh; ++b) {
              const float* xr = xc + id_of[a] * in_plane + ih_of[b] * c.dim[2].in;
              const float* wr = wc + kd_tap[a] * kh_kw + kh_tap[b] * c.dim[2].k;
              for (int e = 0; e < nw; ++e) {
                const float xv = xr[iw_of[e]];
                for (int j = 0; j < CT; ++j) {
                  if (j < tn) acc[j] += xv * wr[static_cast<int64_t>(j) * taps + kw_tap[e]];
                }
              }
            }
          }
        }
        for (int j = 0; j < tn; ++j) {
          const int64_t co = static_cast<int64_t>(group) * c.cog + j0 + j;
          const float bias = c.bias ? c.bias[co] : 0.0f;
          c.y[((n * c.co + co) * c.dim[0].out + od) * c.dim[1].out * c.dim[2].out +
              oh * c.dim[2].out + ow] = epilogue(acc[j] + bias, c.operands, co);
        }
      }
    }
  }
  return 0;
}

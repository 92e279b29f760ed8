// Grouped transposed convolution (cpu), row-scatter form: per output row (n, channel tile, od,
// oh) the input rows that reach it (valid depth and height taps, common/conv_args.h) are each
// scattered along the width: input column iw lands on output column iw * stride + kw * dilation
// - padding for every width tap kw, so the inner loop runs over contiguous inputs with no
// per-element tap test (and over contiguous outputs when the width stride is 1). The row's
// CO_TILE x ow accumulators live in a per-thread buffer. PARALLEL = 1 spreads rows over OpenMP
// threads. fp32 products and sums; each output sums in the order ci, kd, kh, kw.
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

// The input index tap k of dimension `d` reads for output o, or -1.
int64_t source(const kf::ConvDim& d, int64_t o, int k) {
  const int64_t num = o + d.pad - static_cast<int64_t>(k) * d.dil;
  if (num < 0 || num % d.stride != 0 || num / d.stride >= d.in) return -1;
  return num / d.stride;
}

// Adds xr[iw] * wv[j] to acc[j][iw * stride + offset] for every iw whose output is in [0, out).
template <int CT>
void scatter_row(const float* xr, int64_t in, int64_t out, int64_t stride, int64_t offset,
                 const float (&wv)[CT], int tn, float* acc) {
  // first iw with iw * stride + offset >= 0, last with it < out
  const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = out - 1 - offset;
  const int64_t hi = std::min<int64_t>(in, last < 0 ? 0 : last / stride + 1);
  for (int j = 0; j < tn; ++j) {
    float* row = acc + j * out;
    const float v = wv[j];
    if (stride == 1) {
#pragma omp simd
      for (int64_t iw = lo; iw < hi; ++iw) row[iw + offset] += xr[iw] * v;
    } else {
      for (int64_t iw = lo; iw < hi; ++iw) row[iw * stride + offset] += xr[iw] * v;
    }
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_transpose_args(args, c); code != 0) return code;
  constexpr int CT = KF_CO_TILE;
  const auto epilogue = KF_EPILOGUE;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  const int tiles_per_group = (c.cog + CT - 1) / CT;
  const int64_t rows = c.n * c.groups * tiles_per_group * dd.out * dh.out;
  const int64_t in_volume = c.in_volume(), in_plane = dh.in * dw.in;
  const int taps = c.taps();
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
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int ci = group * c.cig; ci < (group + 1) * c.cig; ++ci) {
        const float* xc = c.x + (n * c.c + ci) * in_volume;
        const float* wc = c.w + (static_cast<int64_t>(ci) * c.cog + j0) * taps;
        for (int kd = 0; kd < dd.k; ++kd) {
          const int64_t id = source(dd, od, kd);
          if (id < 0) continue;
          for (int kh = 0; kh < dh.k; ++kh) {
            const int64_t ih = source(dh, oh, kh);
            if (ih < 0) continue;
            const float* xr = xc + id * in_plane + ih * dw.in;
            for (int kw = 0; kw < dw.k; ++kw) {
              float wv[CT] = {};
              for (int j = 0; j < tn; ++j) {
                wv[j] = wc[static_cast<int64_t>(j) * taps + (kd * dh.k + kh) * dw.k + kw];
              }
              const int64_t offset = static_cast<int64_t>(kw) * dw.dil - dw.pad;
              scatter_row<CT>(xr, dw.in, dw.out, dw.stride, offset, wv, tn, acc.data());
            }
          }
        }
      }
      for (int j = 0; j < tn; ++j) {
        const int64_t co = static_cast<int64_t>(group) * c.cog + j0 + j;
        const float bias = c.bias ? c.bias[co] : 0.0f;
        float* yr = c.y + (((n * c.co + co) * dd.out + od) * dh.out + oh) * dw.out;
        const float* ar = acc.data() + static_cast<size_t>(j) * dw.out;
        for (int64_t ow = 0; ow < dw.out; ++ow) yr[ow] = epilogue(ar[ow] + bias, c.operands, co);
      }
    }
  }
  return 0;
}

// Grouped forward convolution (cuda), direct gather: one thread per output position and CO_TILE
// output channels of one group (x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co]
// optional, y [n, co, od, oh, ow], fp32 FMA; geometry as ten integer scalars, common/conv_args.h).
// Threads run along the output's width, so a warp's x loads for one tap are consecutive (stride
// 1) or evenly spaced (stride_w > 1) addresses; each thread tests every tap against the input's
// bounds (o * stride - padding + k * dilation in [0, in)), reads x and the CO_TILE weights of
// each tap through the read-only cache (__ldg; the weights are the same addresses across the
// warp: broadcasts). 64-bit indexing throughout: no size limit. The portable baseline.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <cuda_runtime.h>
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_CO_TILE
#define KF_CO_TILE 4
#endif
#ifndef KF_BLOCK
#define KF_BLOCK 256
#endif

namespace {

constexpr int CT = KF_CO_TILE, BLOCK = KF_BLOCK;

static_assert(CT >= 1 && CT <= 16, "CO_TILE is 1..16");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK: whole warps, <= 1024");

// The input index that tap k of dimension `d` reads for output o, or -1 outside [0, in).
__device__ __forceinline__ int64_t source(const kf::ConvDim& d, int64_t o, int k) {
  const int64_t i = o * d.stride - d.pad + static_cast<int64_t>(k) * d.dil;
  return i >= 0 && i < d.in ? i : -1;
}

__global__ void __launch_bounds__(BLOCK) direct_gather(kf::ConvArgs c, int tiles) {
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  const int64_t out_plane = dh.out * dw.out, out_volume = dd.out * out_plane;
  const int64_t total = c.n * c.groups * tiles * out_volume;
  const int64_t in_plane = dh.in * dw.in, in_volume = dd.in * in_plane;
  const int taps = c.taps();
  const int64_t channel_stride = static_cast<int64_t>(c.cig) * taps;  // between weight[co]s
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * BLOCK) {
    const int64_t ow = index % dw.out;
    const int64_t oh = index / dw.out % dh.out;
    const int64_t od = index / out_plane % dd.out;
    const int tile = static_cast<int>(index / out_volume % tiles);
    const int group = static_cast<int>(index / (out_volume * tiles) % c.groups);
    const int64_t n = index / (out_volume * tiles * c.groups);
    const int j0 = tile * CT;
    const int tn = min(CT, c.cog - j0);
    const int64_t co0 = static_cast<int64_t>(group) * c.cog + j0;
    float acc[CT];
#pragma unroll
    for (int j = 0; j < CT; ++j) acc[j] = 0.0f;
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
            const int64_t iw = source(dw, ow, kw);
            if (iw < 0) continue;
            const float xv = __ldg(xr + iw);
            const int tap = (kd * dh.k + kh) * dw.k + kw;
#pragma unroll
            for (int j = 0; j < CT; ++j) {
              if (j < tn) acc[j] = fmaf(xv, __ldg(wc + j * channel_stride + tap), acc[j]);
            }
          }
        }
      }
    }
    const auto epilogue = KF_EPILOGUE;
#pragma unroll
    for (int j = 0; j < CT; ++j) {
      if (j >= tn) break;
      const int64_t co = co0 + j;
      const float bias = c.bias ? __ldg(c.bias + co) : 0.0f;
      c.y[(n * c.co + co) * out_volume + od * out_plane + oh * dw.out + ow] =
          epilogue(acc[j] + bias, c.operands, co);
    }
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  kf::ConvArgs c;
  if (const int code = kf::conv_forward_args(args, c); code != 0) return code;
  const int tiles = (c.cog + CT - 1) / CT;
  const int64_t total = c.n * c.groups * tiles * c.out_volume();
  if (total == 0) return 0;
  const int64_t blocks = (total + BLOCK - 1) / BLOCK;
  const unsigned grid = static_cast<unsigned>(blocks < (1 << 24) ? blocks : (1 << 24));
  direct_gather<<<grid, BLOCK, 0, static_cast<cudaStream_t>(args->stream)>>>(c, tiles);
  return static_cast<int>(cudaGetLastError());
}

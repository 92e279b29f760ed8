// Grouped forward convolution (cuda), output tiles with the weights in shared memory:
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow],
// fp32 FMA (no tensor cores); geometry as ten integer scalars (common/conv_args.h).
//
// A block owns one (n, group, od), CO_TILE output channels of that group and a chunk of
// BLOCK * POSITIONS positions of the (oh, ow) output plane; each thread accumulates CO_TILE
// channels at POSITIONS plane positions BLOCK apart, so each x value loaded feeds CO_TILE FMAs
// and each weight read POSITIONS FMAs. The group's weights for the block's channels are staged
// in shared memory as [ci][tap][CO_TILE] (zero past the group's last channel), read as
// broadcasts (16-byte reads when CO_TILE is a multiple of 4); weights that do not fit 40 KiB
// (cig * taps * CO_TILE floats) are read from global memory through the read-only cache instead,
// with the same code. Consecutive threads take consecutive output columns, so x is read
// coalesced along the width (stride_w == 1) or evenly strided; depth taps are block-uniform, and
// the input bounds (o * stride - padding + k * dilation in [0, in)) are tested per position, so
// any stride, padding, dilation and tail works. Channel tiles of one output chunk are adjacent
// blocks (tile fastest), so their shared x reads hit L2.
// A depthwise convolution (one output channel per group) runs a one-channel build of the kernel
// instead of wasting CO_TILE - 1 of every CO_TILE FMAs.
// Limits: one (n, channel) input volume and one output plane (plus a chunk) below 2^31 elements,
// and at most 2^31 - 1 blocks (-7 otherwise): offsets inside a volume are int.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <cuda_runtime.h>
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_CO_TILE
#define KF_CO_TILE 8
#endif
#ifndef KF_POSITIONS
#define KF_POSITIONS 2
#endif
#ifndef KF_BLOCK
#define KF_BLOCK 128
#endif

namespace {

constexpr int CT = KF_CO_TILE, POS = KF_POSITIONS, BLOCK = KF_BLOCK;
constexpr int kSmemFloats = 40 * 1024 / 4;  // staged weights (dynamic shared memory) at most

static_assert(CT >= 1 && CT <= 16, "CO_TILE is 1..16");
static_assert(POS >= 1 && POS <= 8, "POSITIONS is 1..8");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK: whole warps, <= 1024");

/// Geometry by value, with the block bookkeeping the launch computes.
struct Plan {
  kf::ConvArgs c;
  int tiles;   // channel tiles per group: ceil(cog / channels per block)
  int chunks;  // chunks of the output plane: ceil(oh * ow / (BLOCK * POS))
};

// The kCT weights of (ci, tap) for the block's channels.
template <int kCT, bool kStaged>
__device__ __forceinline__ void load_weights(const float* w_smem, const float* w_global,
                                             int64_t channel_stride, int tn, int rest,
                                             float (&wv)[kCT]) {
  if constexpr (kStaged && kCT % 4 == 0) {
    const float4* ws = reinterpret_cast<const float4*>(w_smem + rest * kCT);
#pragma unroll
    for (int q = 0; q < kCT / 4; ++q) {
      const float4 v = ws[q];
      wv[4 * q] = v.x;
      wv[4 * q + 1] = v.y;
      wv[4 * q + 2] = v.z;
      wv[4 * q + 3] = v.w;
    }
  } else if constexpr (kStaged) {
#pragma unroll
    for (int j = 0; j < kCT; ++j) wv[j] = w_smem[rest * kCT + j];
  } else {  // channels past the group's last read its last one (their sums are never stored)
#pragma unroll
    for (int j = 0; j < kCT; ++j) wv[j] = __ldg(w_global + min(j, tn - 1) * channel_stride + rest);
  }
}

// kStaged: the block's weights [ci][tap][kCT] are in shared memory; else read from global.
template <int kCT, bool kStaged>
__global__ void __launch_bounds__(BLOCK) smem_tiled(Plan p) {
  const kf::ConvArgs& c = p.c;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  extern __shared__ __align__(16) float w_smem[];  // cig * taps * kCT floats when staged

  // Block index -> (n, group, od, chunk, tile), tile fastest.
  int64_t b = blockIdx.x;
  const int tile = static_cast<int>(b % p.tiles);
  b /= p.tiles;
  const int chunk = static_cast<int>(b % p.chunks);
  b /= p.chunks;
  const int od = static_cast<int>(b % dd.out);
  b /= dd.out;
  const int group = static_cast<int>(b % c.groups);
  const int64_t n = b / c.groups;
  const int j0 = tile * kCT;
  const int tn = min(kCT, c.cog - j0);
  const int taps = c.taps();
  const int64_t co0 = static_cast<int64_t>(group) * c.cog + j0;
  const int64_t channel_stride = static_cast<int64_t>(c.cig) * taps;  // between weight[co]s
  const float* w_global = c.w + co0 * channel_stride;                 // weight[co0, 0, 0]

  if constexpr (kStaged) {  // read weight[co0 + j][rest] contiguously, store [rest][j]
    const int per_channel = static_cast<int>(channel_stride), total = per_channel * kCT;
    for (int e = threadIdx.x; e < total; e += BLOCK) {
      const int j = e / per_channel, rest = e - j * per_channel;
      w_smem[rest * kCT + j] = j < tn ? __ldg(w_global + e) : 0.0f;
    }
    __syncthreads();
  }

  const int in_d = static_cast<int>(dd.in), in_h = static_cast<int>(dh.in);
  const int in_w = static_cast<int>(dw.in), in_plane = in_h * in_w;
  const int out_w = static_cast<int>(dw.out);
  const int plane = static_cast<int>(dh.out) * out_w;
  const int base = chunk * BLOCK * POS;
  int ih0[POS], iw0[POS];
  bool live[POS];
#pragma unroll
  for (int u = 0; u < POS; ++u) {
    const int pos = base + u * BLOCK + threadIdx.x;
    live[u] = pos < plane;
    ih0[u] = (live[u] ? pos / out_w : 0) * dh.stride - dh.pad;
    iw0[u] = (live[u] ? pos % out_w : 0) * dw.stride - dw.pad;
  }
  float acc[POS][kCT];
#pragma unroll
  for (int u = 0; u < POS; ++u) {
#pragma unroll
    for (int j = 0; j < kCT; ++j) acc[u][j] = 0.0f;
  }
  const int id0 = od * dd.stride - dd.pad;
  for (int ci = 0; ci < c.cig; ++ci) {
    const float* xc = c.x + (n * c.c + static_cast<int64_t>(group) * c.cig + ci) * in_d * in_plane;
    for (int kd = 0; kd < dd.k; ++kd) {
      const int id = id0 + kd * dd.dil;  // block-uniform
      if (id < 0 || id >= in_d) continue;
      const float* xd = xc + id * in_plane;
      for (int kh = 0; kh < dh.k; ++kh) {
        int row[POS];  // offset of the input row in the slice, or -1 when outside
#pragma unroll
        for (int u = 0; u < POS; ++u) {
          const int ih = ih0[u] + kh * dh.dil;
          row[u] = live[u] && ih >= 0 && ih < in_h ? ih * in_w : -1;
        }
        const int rest_dh = ci * taps + (kd * dh.k + kh) * dw.k;
        for (int kw = 0; kw < dw.k; ++kw) {
          float wv[kCT];
          load_weights<kCT, kStaged>(w_smem, w_global, channel_stride, tn, rest_dh + kw, wv);
          const int shift = kw * dw.dil;
#pragma unroll
          for (int u = 0; u < POS; ++u) {
            const int iw = iw0[u] + shift;
            if (row[u] >= 0 && static_cast<unsigned>(iw) < static_cast<unsigned>(in_w)) {
              const float xv = __ldg(xd + row[u] + iw);
#pragma unroll
              for (int j = 0; j < kCT; ++j) acc[u][j] = fmaf(xv, wv[j], acc[u][j]);
            }
          }
        }
      }
    }
  }
  const auto epilogue = KF_EPILOGUE;
#pragma unroll
  for (int u = 0; u < POS; ++u) {
    if (!live[u]) continue;
    const int pos = base + u * BLOCK + threadIdx.x;
#pragma unroll
    for (int j = 0; j < kCT; ++j) {
      if (j >= tn) break;
      const int64_t co = co0 + j;
      const float bias = c.bias ? __ldg(c.bias + co) : 0.0f;
      c.y[((n * c.co + co) * dd.out + od) * plane + pos] =
          epilogue(acc[u][j] + bias, c.operands, co);
    }
  }
}

// Fills p.tiles and p.chunks for kCT channels per block; returns the block count, or -7 past
// the int limits.
template <int kCT>
int64_t plan_blocks(Plan& p) {
  const kf::ConvArgs& c = p.c;
  constexpr int64_t kIntMax = 0x7fffffff;
  const int64_t plane = c.dim[1].out * c.dim[2].out;
  if (c.in_volume() >= kIntMax || plane + BLOCK * POS >= kIntMax || c.dim[0].out >= kIntMax) {
    return -7;
  }
  p.tiles = (c.cog + kCT - 1) / kCT;
  p.chunks = static_cast<int>((plane + BLOCK * POS - 1) / (BLOCK * POS));
  const int64_t blocks = c.n * c.groups * c.dim[0].out * p.chunks * p.tiles;
  return blocks > kIntMax ? -7 : blocks;
}

// Whether the block's weights, cig * taps * channels floats, fit the shared-memory budget.
bool fits_smem(const kf::ConvArgs& c, int channels) {
  return static_cast<int64_t>(c.cig) * c.taps() * channels <= kSmemFloats;
}

// Launches the (kCT, kStaged) build; returns 0, -7 past the int limits, or the cudaError_t.
template <int kCT, bool kStaged>
int launch(Plan& p, cudaStream_t stream) {
  const int64_t blocks = plan_blocks<kCT>(p);
  if (blocks <= 0) return static_cast<int>(blocks);
  const size_t smem = kStaged ? sizeof(float) * p.c.cig * p.c.taps() * kCT : 0;
  smem_tiled<kCT, kStaged><<<static_cast<unsigned>(blocks), BLOCK, smem, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  Plan p;
  if (const int code = kf::conv_forward_args(args, p.c); code != 0) return code;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  if constexpr (CT > 1) {  // depthwise: one channel per block, its taps staged
    if (p.c.cog == 1 && fits_smem(p.c, 1)) return launch<1, true>(p, stream);
  }
  return fits_smem(p.c, CT) ? launch<CT, true>(p, stream) : launch<CT, false>(p, stream);
}

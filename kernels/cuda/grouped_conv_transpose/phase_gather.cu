// Grouped transposed convolution (cuda), phase-decomposed gather: x [n, c, d, h, w],
// weight [c, cog, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow], fp32 FMA (no tensor
// cores); geometry as ten integer scalars (common/conv_args.h).
//
// An output position o reads tap k exactly when (o + padding - k * dilation) is a multiple of the
// stride, so outputs of one residue r = o mod stride (a "phase") share their taps, and along a
// phase consecutive outputs read consecutive inputs: o = r + stride * t reads i = t + off(k) with
// off(k) = (r + padding - k * dilation) / stride. Splitting the output into its stride_h x
// stride_w phases turns the transposed convolution into dense, stride-1 gathers (the sub-pixel
// view of Shi et al. 2016, "Is the deconvolution layer the same as a convolutional layer?", and
// Dumoulin & Visin 2016, section 4.6). A block owns one (n, group, CO_TILE channels, od, height
// phase, width phase) and a chunk of that phase's (oh, ow) plane: its threads share every tap
// decision (no divergence except at the input's edges), read x coalesced along the width, and
// read the group's weights, staged in shared memory as [ci][tap][CO_TILE], as broadcasts. Each
// thread accumulates CO_TILE channels at POSITIONS plane positions BLOCK apart, so each x value
// is used CO_TILE times and each weight POSITIONS times.
// Weights that do not fit 40 KiB of shared memory (cig * taps * CO_TILE floats) are read from
// global memory through the read-only cache instead, with the same code.
// Limits: per-dimension kernel extent <= kMaxTaps (-6 otherwise); one (n, channel) input volume
// and one output plane below 2^31 elements, and at most 2^31 - 1 blocks (-7 otherwise).
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

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
constexpr int kMaxTaps = 32;                     // per dimension
constexpr int kSmemFloats = 40 * 1024 / 4;  // staged weights (dynamic shared memory) at most

static_assert(CT == 1 || CT == 2 || CT == 4 || CT == 8 || CT == 16, "CO_TILE is 1..16, power of 2");
static_assert(POS >= 1 && POS <= 8, "POSITIONS is 1..8");
static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK: whole warps, <= 1024");

/// Geometry by value, with the phase bookkeeping the launch computes.
struct Plan {
  kf::ConvArgs c;
  int tiles;            // channel tiles per group: ceil(cog / CT)
  int64_t chunks;       // plane chunks per phase (of the largest phase)
  bool staged;          // weights in shared memory
};

__device__ __forceinline__ int floor_div(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Taps of dimension `d` valid for phase r, with their offsets (input = t + off); returns count.
// Extents are checked on the host to fit int (kf::ConvArgs holds them as int64).
__device__ int phase_taps(const kf::ConvDim& d, int r, int* taps, int* off) {
  int count = 0;
  for (int k = 0; k < d.k; ++k) {
    const int num = r + d.pad - k * d.dil;
    if (((num % d.stride) + d.stride) % d.stride != 0) continue;
    taps[count] = k;
    off[count++] = floor_div(num, d.stride);
  }
  return count;
}

// kStaged: the block's weights [ci][tap][CT] are in shared memory; else read from global.
template <bool kStaged>
__global__ void __launch_bounds__(BLOCK) phase_gather(Plan p) {
  const kf::ConvArgs& c = p.c;
  const kf::ConvDim &dd = c.dim[0], &dh = c.dim[1], &dw = c.dim[2];
  extern __shared__ __align__(16) float w_smem[];  // cig * taps * CT floats when staged
  __shared__ int kd_tap[kMaxTaps], kh_tap[kMaxTaps], kw_tap[kMaxTaps];
  __shared__ int id_of[kMaxTaps], h_off[kMaxTaps], w_off[kMaxTaps];
  __shared__ int counts[3];

  // Block index -> (n, group, tile, od, rh, rw, chunk), chunk fastest.
  int64_t b = blockIdx.x;
  const int chunk = static_cast<int>(b % p.chunks);
  b /= p.chunks;
  const int rw = static_cast<int>(b % dw.stride);
  b /= dw.stride;
  const int rh = static_cast<int>(b % dh.stride);
  b /= dh.stride;
  const int od = static_cast<int>(b % dd.out);
  b /= dd.out;
  const int tile = static_cast<int>(b % p.tiles);
  b /= p.tiles;
  const int group = static_cast<int>(b % c.groups);
  const int64_t n = b / c.groups;
  const int in_h = static_cast<int>(dh.in), in_w = static_cast<int>(dw.in);
  const int out_h = static_cast<int>(dh.out), out_w = static_cast<int>(dw.out);
  const int cnt_h = rh < out_h ? (out_h - rh + dh.stride - 1) / dh.stride : 0;
  const int cnt_w = rw < out_w ? (out_w - rw + dw.stride - 1) / dw.stride : 0;
  const int plane = cnt_h * cnt_w;
  const int base = chunk * BLOCK * POS;
  if (base >= plane) return;  // a smaller phase than the largest: nothing here (block-uniform)
  const int j0 = tile * CT;
  const int tn = min(CT, c.cog - j0);
  const int taps = c.taps();

  if (threadIdx.x == 0) {
    int off[kMaxTaps], k[kMaxTaps];
    const int nd_all = phase_taps(dd, od % dd.stride, k, off);
    int nd = 0;
    for (int a = 0; a < nd_all; ++a) {  // od is fixed: keep the taps whose input exists
      const int id = od / dd.stride + off[a];
      if (id < 0 || id >= dd.in) continue;
      kd_tap[nd] = k[a];
      id_of[nd++] = id;
    }
    counts[0] = nd;
    counts[1] = phase_taps(dh, rh, kh_tap, h_off);
    counts[2] = phase_taps(dw, rw, kw_tap, w_off);
  }
  if (kStaged) {  // the group's channels j0 .. j0 + CT as [ci][tap][CT], zero past tn
    const int total = c.cig * taps * CT;
    for (int e = threadIdx.x; e < total; e += BLOCK) {
      const int j = e % CT, tap = e / CT % taps, ci = e / (CT * taps);
      w_smem[e] = j < tn ? __ldg(c.w + ((static_cast<int64_t>(group) * c.cig + ci) * c.cog +
                                        j0 + j) * taps + tap)
                         : 0.0f;
    }
  }
  __syncthreads();
  const int nd = counts[0], nh = counts[1], nw = counts[2];

  int oh_i[POS], t_i[POS];
  bool live[POS];
#pragma unroll
  for (int u = 0; u < POS; ++u) {
    const int pos = base + u * BLOCK + threadIdx.x;
    live[u] = pos < plane;
    oh_i[u] = live[u] ? pos / cnt_w : 0;
    t_i[u] = live[u] ? pos % cnt_w : 0;
  }
  float acc[POS][CT];
#pragma unroll
  for (int u = 0; u < POS; ++u) {
#pragma unroll
    for (int j = 0; j < CT; ++j) acc[u][j] = 0.0f;
  }
  const int in_plane = in_h * in_w;
  for (int ci = 0; ci < c.cig; ++ci) {
    // One (n, channel) input volume: offsets inside it fit int (checked on the host).
    const float* xc = c.x + (n * c.c + static_cast<int64_t>(group) * c.cig + ci) * dd.in *
                                in_plane;
    for (int a = 0; a < nd; ++a) {
      const float* xd = xc + id_of[a] * in_plane;
      for (int bh = 0; bh < nh; ++bh) {
        int row[POS];  // offset of the input row, or -1 when outside
#pragma unroll
        for (int u = 0; u < POS; ++u) {
          const int ih = oh_i[u] + h_off[bh];
          row[u] = live[u] && ih >= 0 && ih < in_h ? ih * in_w : -1;
        }
        const int tap_dh = (kd_tap[a] * dh.k + kh_tap[bh]) * dw.k;
        for (int e = 0; e < nw; ++e) {
          const int tap = tap_dh + kw_tap[e];
          float wv[CT];
          if (kStaged) {
            const float* ws = w_smem + (ci * taps + tap) * CT;
#pragma unroll
            for (int j = 0; j < CT; ++j) wv[j] = ws[j];
          } else {
            const float* ws = c.w + ((static_cast<int64_t>(group) * c.cig + ci) * c.cog + j0) *
                                        taps + tap;
#pragma unroll
            for (int j = 0; j < CT; ++j) wv[j] = j < tn ? __ldg(ws + j * taps) : 0.0f;
          }
          const int shift = w_off[e];
#pragma unroll
          for (int u = 0; u < POS; ++u) {
            const int iw = t_i[u] + shift;
            if (row[u] >= 0 && static_cast<unsigned>(iw) < static_cast<unsigned>(in_w)) {
              const float xv = __ldg(xd + row[u] + iw);
#pragma unroll
              for (int j = 0; j < CT; ++j) acc[u][j] = fmaf(xv, wv[j], acc[u][j]);
            }
          }
        }
      }
    }
  }
  const int64_t out_plane = static_cast<int64_t>(out_h) * out_w;
  const auto epilogue = KF_EPILOGUE;
#pragma unroll
  for (int u = 0; u < POS; ++u) {
    if (!live[u]) continue;
    const int oh = rh + dh.stride * oh_i[u], ow = rw + dw.stride * t_i[u];
#pragma unroll
    for (int j = 0; j < CT; ++j) {
      if (j >= tn) break;
      const int64_t co = static_cast<int64_t>(group) * c.cog + j0 + j;
      const float bias = c.bias ? __ldg(c.bias + co) : 0.0f;
      c.y[((n * c.co + co) * dd.out + od) * out_plane + oh * out_w + ow] =
          epilogue(acc[u][j] + bias, c.operands, co);
    }
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  Plan p;
  if (const int code = kf::conv_transpose_args(args, p.c); code != 0) return code;
  const kf::ConvArgs& c = p.c;
  for (const kf::ConvDim& d : c.dim) {
    if (d.k > kMaxTaps) return -6;
  }
  p.tiles = (c.cog + CT - 1) / CT;
  const int64_t cnt_h = (c.dim[1].out + c.dim[1].stride - 1) / c.dim[1].stride;
  const int64_t cnt_w = (c.dim[2].out + c.dim[2].stride - 1) / c.dim[2].stride;
  p.chunks = (cnt_h * cnt_w + static_cast<int64_t>(BLOCK) * POS - 1) / (BLOCK * POS);
  p.staged = static_cast<int64_t>(c.cig) * c.taps() * CT <= kSmemFloats;
  // The kernel indexes within one (n, channel) volume, and a phase's plane, in int.
  constexpr int64_t kIntMax = 0x7fffffff;
  if (c.in_volume() >= kIntMax || c.dim[1].out * c.dim[2].out >= kIntMax ||
      c.dim[0].out >= kIntMax) {
    return -7;
  }
  const int64_t blocks = c.n * c.groups * p.tiles * c.dim[0].out * c.dim[1].stride *
                         c.dim[2].stride * p.chunks;
  if (blocks == 0) return 0;
  if (blocks > kIntMax) return -7;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  if (p.staged) {
    const size_t smem = sizeof(float) * c.cig * c.taps() * CT;
    phase_gather<true><<<static_cast<unsigned>(blocks), BLOCK, smem, stream>>>(p);
  } else {
    phase_gather<false><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(p);
  }
  return static_cast<int>(cudaGetLastError());
}

// Grouped forward convolution (cuda) as an implicit GEMM on TF32 tensor cores at fp32 accuracy
// (3xTF32, kernels/cuda/common/tf32x3.cuh): x [n, c, d, h, w], weight [co, cig, kd, kh, kw],
// bias [co] optional, y [n, co, od, oh, ow], fp32; geometry as ten integer scalars
// (common/conv_args.h); the task's epilogue chain applied at the store.
//
// Formulation (NVIDIA CUTLASS, "Implicit GEMM convolution", docs/implicit_gemm_convolution.md;
// the index math in kernels/cuda/common/conv_implicit_gemm.h, checked on the CPU by
// tests/conv_implicit_gemm_test.cpp): per group g, C[m, p] = sum_k A[m, k] * B[k, p] with
// M = cog, N = n * od*oh*ow output positions, K = cig * kd*kh*kw; A = the group's weight rows
// (K-contiguous), B[k, p] = the input element tap k of position p reads, or 0 in the padding,
// never formed in memory.
//
// Block: a BM x BN tile of (m, p) of one group (grid (N tiles, M tiles, groups)), 8 warps as 2
// (M) x 4 (N), k-slices BK deep in a STAGES-deep cp.async pipeline; the warps' math is
// gemm_epilogue's tf32x3_mma (warp_slice: hi/lo split, three mma.sync m16n8k8 per tile and
// k-step, the running sum kept in fp32 outside the tensor cores).
//   A slice [BM][BK + 4]: load_tile's 16-byte copies when K % 4 == 0, else 4-byte ones down one
//     column per thread; rows past cog and columns past K zero-filled; fragment reads
//     conflict-free as in tf32x3_mma (banks 4g + t).
//   B slice [BK][BN + 8] (k-major, warp_slice's kNN form): gathered with 4-byte cp.async,
//     src-size 0 (a zero) for padding taps and the tails past N and K. Thread tid owns output
//     position p = bn0 + tid % BN for the whole k-loop (decomposed once into its input origin)
//     and rows tid / BN + j * (256 / BN) of every slice: consecutive threads take consecutive
//     positions, so a warp's copies of one k row read consecutive input columns (coalesced
//     along ow at stride 1). Its k rows advance by a cursor (ci, kd, kh, kw) with carries, not
//     divisions. A row of BN + 8 floats puts the fragment read (k = t, n = g) on bank 8t + g:
//     conflict-free.
// Stores: c0..c3 of each accumulator tile at (co, p), (co, p + 1); bias and the chain per output
// channel; float2 stores when od*oh*ow is even (p, p + 1 then share a batch and an 8-byte word).
// Registers (ptxas, sm_90, nvcc 13.0; K % 4 == 0 build / other): 99 / 88 at the default point
// (BM 128, BN 64, BK 32, STAGES 3: two blocks per SM), 64..190 over the 16 points of
// family.toml, no spills at any of them.
//
// KernelBench L2/1 (bench/tasks/conv2d_relu_bias_kernelbench; n 128, ci 64, co 128, 3x3, 128 x
// 128 input, 126 x 126 output, groups 1): M = 128, N = 2,032,128, K = 576.
//   FLOPs 2*M*N*K = 299,649,466,368. Bytes (minimum) x 536,870,912 + weight 294,912 + bias and
//   shift 1,024 + y 1,040,449,536 = 1,577,616,384 (190 FLOP/byte: compute-bound).
//   Ceilings on an H200: HBM 0.37 ms at 4.25 TB/s; fp32 SIMT 5.9 ms at ~51 TFLOP/s; 3xTF32
//   1.8 ms at ~165 TFLOP/s (a third of TF32's ~494 dense: an upper bound that needs wgmma;
//   mma.sync, used here, reaches less). Eager PyTorch takes 3.93 ms (76 TFLOP/s) only because
//   cuDNN runs it on plain TF32 tensor cores, which the fp32 precision rule rejects: this
//   decomposition is the one that can beat eager at fp32 accuracy (needs > 46% of the bound).
//   Grid at the default BM 128, BN 64: 31,752 x 1 x 1 blocks (one M tile: x gathered once).
// 3xTF32 (Ootomo & Yokota, "Recovering single precision accuracy from Tensor Cores while
// surpassing the FP32 theoretical peak performance", IJHPCA 2022): errors as tf32x3.cuh says.
// Limits (-7 otherwise): groups and ceil(cog / BM) <= 65535 (grid.z, grid.y), ceil(N / BN) <
// 2^31, cig * d*h*w and cig * taps below 2^31 (offsets inside one (n, group) slice are int).
// sm_80+.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <cuda/common/conv_implicit_gemm.h>
#include <cuda/common/elem.cuh>  // kf::aligned
#include <cuda/common/tf32x3.cuh>
#include <cuda_runtime.h>
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_BM
#define KF_BM 128
#endif
#ifndef KF_BN
#define KF_BN 64
#endif
#ifndef KF_BK
#define KF_BK 32
#endif
#ifndef KF_STAGES
#define KF_STAGES 3
#endif

namespace {

constexpr int BM = KF_BM, BN = KF_BN, BK = KF_BK, STAGES = KF_STAGES;
constexpr int kWarpsM = 2, kWarpsN = 4;  // tf32x3_mma's 8 warps: enough to hide mma.sync latency
constexpr int kThreads = kWarpsM * kWarpsN * 32;
constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;  // one warp's tile
constexpr int MI = WM / 16, NI = WN / 8;             // m16n8 tiles per warp
constexpr int LDA = BK + 4;                          // A row, floats: banks 4g + t
constexpr int LDB = BN + 8;                          // B row, floats: banks 8t + g
constexpr int kRowStep = kThreads / BN;              // k rows between one thread's B copies
constexpr int kStageFloats = BM * LDA + BK * LDB;
constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStageFloats;

static_assert(BM % (16 * kWarpsM) == 0 && BN % (8 * kWarpsN) == 0, "warp tiles of m16n8");
static_assert(BK % 8 == 0 && BK >= 8 && BK <= 64, "BK: a multiple of the mma's k = 8");
static_assert(STAGES >= 2 && STAGES <= 4, "STAGES in [2, 4]");
static_assert(kThreads % BN == 0 && BN >= 32 && BK % kRowStep == 0,
              "a thread keeps one output position; a warp gathers one k row per copy");
static_assert((BM * BK / 4) % kThreads == 0 && kThreads % BK == 0,
              "every thread issues the same A copies per stage");
static_assert(LDB % 32 == 8, "B fragment reads (k = t, n = g) on banks 8t + g");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");

using kf::conv_igemm::Cursor;
using kf::conv_igemm::Origin;
using kf::conv_igemm::Plan;

/// Issues this thread's BK / kRowStep copies of B's slice at the cursor (rows row0 + j *
/// kRowStep of `b_s`, column `col`), zero-filled for padding taps and past K; advances the
/// cursor. The carries are the same for every thread of a warp (one k row per warp per copy).
/// Not unrolled: unrolled, ptxas keeps more of the copies' state live across the k-loop (133
/// registers instead of 99 at the default point: one block per SM instead of two), and the
/// copies are asynchronous, so the loop costs a few integer instructions per copy.
__device__ __forceinline__ void gather_slice(const Plan& p, const Origin& o, Cursor& cur,
                                             float* b_s, int row0, int col) {
#pragma unroll 1
  for (int j = 0; j < BK / kRowStep; ++j) {
    const float* src;
    const bool inside = kf::conv_igemm::tap_source(p, o, cur, src);
    kf::tf32x3::cp_async_4(b_s + (row0 + j * kRowStep) * LDB + col, src, inside ? 4 : 0);
    kf::conv_igemm::advance<kRowStep>(p, cur);
  }
}

/// Issues the copies of A's slice [BM][BK] at (bm0, k0) of the group's weight rows w [cog][K].
/// kVec: load_tile's 16-byte copies. Else 4-byte ones, each thread walking one column down its
/// rows with one pointer: load_tile's 4-byte form keeps an address per copy live across the
/// k-loop, which spills at BM 128, BK 32 (up to 255 registers) next to the gather's state.
template <bool kVec>
__device__ __forceinline__ void load_a(float* a_s, const float* w, const Plan& p, int bm0, int k0,
                                       int tid) {
  if constexpr (kVec) {
    kf::tf32x3::load_tile<BM, BK, LDA, kThreads, true>(a_s, w, p.c.cog, p.k_total, p.k_total, bm0,
                                                       k0, tid);
  } else {
    constexpr int kRowsPerPass = kThreads / BK;
    const int col = tid % BK, row = tid / BK;
    const bool col_inside = k0 + col < p.k_total;
    const int rows_left = p.c.cog - bm0 - row;  // rows of this thread's column inside A
    const float* src = w + static_cast<int64_t>(bm0 + row) * p.k_total + k0 + col;
#pragma unroll
    for (int i = 0; i < BM / kRowsPerPass; ++i) {
      const bool inside = col_inside && i * kRowsPerPass < rows_left;
      kf::tf32x3::cp_async_4(a_s + (row + i * kRowsPerPass) * LDA + col, inside ? src : w,
                             inside ? 4 : 0);
      src += static_cast<int64_t>(kRowsPerPass) * p.k_total;
    }
  }
}

template <bool kVecA>
__global__ void __launch_bounds__(kThreads) implicit_gemm_3xtf32(Plan p, bool pair_stores) {
  // A compile-time chain: its scalar indices fold (tf32x3_mma.cu says why).
  constexpr auto epilogue = KF_EPILOGUE;
  extern __shared__ __align__(16) float smem[];
  const kf::ConvArgs& c = p.c;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  const int group = blockIdx.z;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int bm0 = blockIdx.y * BM;
  const int ktiles = (p.k_total + BK - 1) / BK;
  const float* w_group = c.w + static_cast<int64_t>(group) * c.cog * p.k_total;  // [cog][K]

  const int b_col = tid % BN, b_row0 = tid / BN;
  const Origin origin = kf::conv_igemm::origin_of(p, bn0 + b_col, group);
  Cursor cursor;
  auto load_stage = [&](int stage, int kt) {
    float* a_s = smem + stage * kStageFloats;
    const int k0 = kt * BK;
    load_a<kVecA>(a_s, w_group, p, bm0, k0, tid);
    // Slices arrive in order, so the cursor is already there after the first one.
    if (cursor.k != k0 + b_row0) cursor = kf::conv_igemm::seek(p, k0 + b_row0);
    gather_slice(p, origin, cursor, a_s + BM * LDA, b_row0, b_col);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;

  kf::tf32x3::pipelined_k_loop<STAGES>(ktiles, load_stage, [&](int stage) {
    const float* a_s = smem + stage * kStageFloats;
    kf::tf32x3::warp_slice<BK, MI, NI, LDA, LDB, true>(a_s + wm * WM * LDA,
                                                       a_s + BM * LDA + wn * WN, g, t, acc);
  });

  // Store: c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at (g + 8, ...): rows are output channels,
  // columns output positions.
  int64_t y_at[NI][2];  // y offsets of the columns in channel g*cog, -1 past N
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    const int64_t col = bn0 + wn * WN + ni * 8 + 2 * t;
    y_at[ni][0] = col < p.positions ? kf::conv_igemm::y_offset(p, col, group) : -1;
    if (pair_stores) {  // N even too: col < N implies col + 1 < N, in the same batch
      y_at[ni][1] = y_at[ni][0] < 0 ? -1 : y_at[ni][0] + 1;
    } else {
      y_at[ni][1] = col + 1 < p.positions ? kf::conv_igemm::y_offset(p, col + 1, group) : -1;
    }
  }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = bm0 + wm * WM + mi * 16 + g + half * 8;
      if (row >= c.cog) continue;
      const int64_t co = static_cast<int64_t>(group) * c.cog + row;
      const float bias = c.bias != nullptr ? c.bias[co] : 0.0f;
      float* y_row = c.y + static_cast<int64_t>(row) * p.out_volume;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const float v0 = epilogue(acc[mi][ni][2 * half] + bias, c.operands, co);
        const float v1 = epilogue(acc[mi][ni][2 * half + 1] + bias, c.operands, co);
        if (pair_stores && y_at[ni][0] >= 0) {  // p, p + 1 in one batch, 8-byte aligned
          *reinterpret_cast<float2*>(y_row + y_at[ni][0]) = make_float2(v0, v1);
        } else {
          if (y_at[ni][0] >= 0) y_row[y_at[ni][0]] = v0;
          if (y_at[ni][1] >= 0) y_row[y_at[ni][1]] = v1;
        }
      }
    }
}

template <bool kVecA>
int launch(const Plan& p, cudaStream_t stream) {
  auto kernel = implicit_gemm_3xtf32<kVecA>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in (a host-side attribute, no sync).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSmemBytes));
  if (err != cudaSuccess) return static_cast<int>(err);
  const dim3 grid(static_cast<unsigned>((p.positions + BN - 1) / BN),
                  static_cast<unsigned>((p.c.cog + BM - 1) / BM),
                  static_cast<unsigned>(p.c.groups));
  const bool pairs = p.out_volume % 2 == 0 && kf::aligned(p.c.y, 8);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p, pairs);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Error codes: conv_forward_args' (-1 .. -5), -7 past the limits above, otherwise the
// cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  Plan p;
  if (const int code = kf::conv_forward_args(args, p.c); code != 0) return code;
  if (p.c.n == 0 || p.c.co == 0) return 0;
  if (!kf::conv_igemm::plan(p, BM, BN)) return -7;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  // A rows are 16-byte aligned when K % 4 == 0 (the group offset cog * K keeps that).
  const bool vec_a = p.k_total % 4 == 0 && kf::aligned(p.c.w, 16);
  return vec_a ? launch<true>(p, stream) : launch<false>(p, stream);
}

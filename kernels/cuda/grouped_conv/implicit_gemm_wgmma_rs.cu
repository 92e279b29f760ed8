// Grouped forward convolution (cuda, sm_90a) as an implicit GEMM on Hopper's warpgroup tensor
// cores at fp32 accuracy: gemm_epilogue's RS wgmma 3xTF32 GEMM (kernels/cuda/common/
// gemm_wgmma_rs.cuh) with its X operand gathered from the input instead of read as rows.
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow],
// fp32; geometry as ten integer scalars (common/conv_args.h); the task's epilogue chain applied
// at the store.
//
// Orientation (the transpose of implicit_gemm_3xtf32's): per group g, C[p, m] = sum_k X[p, k] *
// W[m, k] with p < M = n * od*oh*ow output positions, m < N = cog output channels, K = cig *
// taps (kernels/cuda/common/conv_implicit_gemm.h: B[k, p] there is X[p, k] here). So:
// - W = the group's weight rows [cog][K], K contiguous: the GEMM's W operand as it is (groups
//   are the GEMM's batches), by TMA boxes when K % 4 == 0 and the weight is 16-byte aligned,
//   else by 4-byte copies; its hi/lo split in shared memory, as in the GEMM.
// - X = the im2col matrix, never formed: each slice [128 positions][32 k] gathered with 4-byte
//   cp.async (src-size 0: a zero for padding taps and past M and K) into the GEMM's swizzled
//   K-major tile, then split in registers (wgmma's RS form) as the GEMM splits X. Thread
//   (warp w, lane l) owns positions 16w + l/4 and 16w + l/4 + 8 of the tile (their input origins
//   decomposed once) and columns 4q + l % 4, q < 8, walked by one cursor (conv_igemm::advance, no
//   divisions in the loop). A copy instruction of a warp then reads 8 consecutive positions x 4
//   consecutive taps (two or three 32-byte sectors along ow at stride 1) and writes 8 rows x 4
//   columns of one 16-byte chunk, chunk q ^ (row % 8): 32 distinct banks. The cursor's walk
//   (start at column l % 4, 4 rows a copy, 8 copies a 32-deep slice) is gather_block<4> at BK 32
//   in tests/conv_implicit_gemm_test.cpp, checked there against a direct convolution.
// - Stores: the accumulator's rows are positions, its columns channels: lanes g4 = 0..7 write 8
//   consecutive positions of one channel (32 bytes); bias and the chain per channel.
// Blocks: the GEMM's grouped order (8 position tiles a group), so the blocks resident at once
// read overlapping input rows from L2.
//
// KernelBench L2/1 (bench/tasks/conv2d_relu_bias_kernelbench; n 128, ci 64, co 128, 3x3, 128 x
// 128 input, 126 x 126 output): M = 2,032,128, N = 128, K = 576; 299.6 GFLOP, 1.58 GB at least
// (190 FLOP/byte: compute-bound). Eager PyTorch: 3.9-4.4 ms on plain TF32 (cuDNN's default),
// which the fp32 precision rule rejects. 3xTF32 is three TF32 products per term: ~900 GFLOP of
// TF32 work, ~1.8 ms at the H200's ~494 TFLOP/s dense; gemm_wgmma_rs reached ~61% of that rate
// on L2/63's GEMM (bench/kernels/compute_bound_s19.md), ~3 ms here if the gather kept up.
// Measured on an H100 (bench/kernels/compute_bound_s20.md): 8.25 ms at the default point (36
// TFLOP/s; FLUSH 1 8.61, BN 64 12.99), against implicit_gemm_3xtf32's 11.6 (mma.sync), cuDNN's
// fp32 9.66 and eager's default TF32 4.47: a third of the GEMM's rate, not yet profiled (the
// gather's copies and bounds tests, 18 slices a tile to amortize the ring's fill and the
// stores). TMA's im2col mode on an NHWC copy of x and persistent tiles are the next steps.
// Sources: NVIDIA CUTLASS, "Implicit GEMM convolution" (docs/implicit_gemm_convolution.md);
// PTX ISA 9.0, wgmma with A in registers; Ootomo & Yokota, IJHPCA 2022 (the 3xTF32 split).
// Limits (-7 otherwise): conv_igemm::plan's with a 128-position M tile, and fewer than 2^31
// tiles. sm_90a.
#include <common/conv_args.h>
#include <common/epilogue.h>
#include <cuda/common/conv_implicit_gemm.h>
#include <cuda/common/elem.cuh>  // kf::aligned
#include <cuda/common/gemm_wgmma_rs.cuh>
#include <cuda/common/tf32x3.cuh>
#include <cuda_runtime.h>
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_BN
#define KF_BN 128
#endif
#ifndef KF_STAGES
#define KF_STAGES 4
#endif
#ifndef KF_FLUSH
#define KF_FLUSH 4
#endif

namespace {

using kf::conv_igemm::Cursor;
using kf::conv_igemm::Origin;
using kf::conv_igemm::Plan;

/// The im2col gather of X's slices (gemm_wgmma_rs's Gather): see the header comment for which
/// thread copies what.
struct ConvGather {
  static constexpr bool kRows = false;
  Plan p;

  struct Copier {
    const Plan* p;
    Origin origin[2];  // positions row and row + 8 of the tile
    Cursor cursor;
    int row, column;   // this thread's first tile row and its column within a chunk (0..3)

    /// Issues this thread's 16 copies of slice [k0, k0 + 32) (k0 advancing by 32 a call).
    __device__ __forceinline__ void load(float* tile, int64_t k0) {
      if (cursor.k != static_cast<int>(k0) + column) {
        cursor = kf::conv_igemm::seek(*p, static_cast<int>(k0) + column);
      }
      // row % 8 == lane / 4 for both rows: chunk q sits at q ^ (row % 8).
      float* dst = tile + row * kf::wgmma_rs::kBK + column;
      const int swizzle = row & 7;
#pragma unroll 1
      for (int q = 0; q < 8; ++q) {
        float* at = dst + ((q ^ swizzle) << 2);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float* src;
          const bool inside = kf::conv_igemm::tap_source(*p, origin[h], cursor, src);
          kf::tf32x3::cp_async_4(at + h * 8 * kf::wgmma_rs::kBK, src, inside ? 4 : 0);
        }
        kf::conv_igemm::advance<4>(*p, cursor);
      }
    }
  };

  /// Thread tid's copier for the tile of positions [m0, m0 + 128) of group `group`.
  __device__ __forceinline__ Copier start(int64_t group, int64_t m0, int tid) const {
    Copier c;
    c.p = &p;
    const int warp = tid >> 5, lane = tid & 31;
    c.row = 16 * warp + (lane >> 2);
    c.column = lane & 3;
    c.origin[0] = kf::conv_igemm::origin_of(p, m0 + c.row, static_cast<int>(group));
    c.origin[1] = kf::conv_igemm::origin_of(p, m0 + c.row + 8, static_cast<int>(group));
    return c;
  }
};

/// y[n, g*cog + m, position] = epilogue(v + bias[g*cog + m]) for GEMM element (position, m) of
/// group g; a position's division into (n, offset) once a row of the tile.
struct ConvStore {
  Plan p;
  __device__ __forceinline__ auto row(int64_t group, int64_t position) const {
    const int64_t first_channel = group * p.c.cog;
    float* y_at = p.c.y + kf::conv_igemm::y_offset(p, position, static_cast<int>(group));
    return [this, first_channel, y_at](int64_t m, float v) {
      constexpr auto epilogue = KF_EPILOGUE;  // a compile-time chain: its scalar indices fold
      const int64_t co = first_channel + m;
      const float bias = p.c.bias != nullptr ? p.c.bias[co] : 0.0f;
      y_at[m * p.out_volume] = epilogue(v + bias, p.c.operands, co);
    };
  }
};

}  // namespace

// Error codes: conv_forward_args' (-1 .. -5), -7 past the limits above, otherwise the
// cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  Plan p;
  if (const int code = kf::conv_forward_args(args, p.c); code != 0) return code;
  if (p.c.n == 0 || p.c.co == 0) return 0;
  // plan()'s grid is (N tiles, M tiles, groups) of its own kernel: here its "N" is our M.
  if (!kf::conv_igemm::plan(p, KF_BN, kf::wgmma_rs::kBM)) return -7;
  kf::wgmma_rs::Problem g;
  g.x = p.c.x;  // unused: the gather reads x
  g.w = p.c.w;
  g.m = p.positions;
  g.n = p.c.cog;
  g.k = p.k_total;
  g.ldx = g.ldw = p.k_total;
  g.batch_x = 0;
  g.batch_w = static_cast<int64_t>(p.c.cog) * p.k_total;
  const cudaError_t err = kf::wgmma_rs::launch<KF_BN, KF_STAGES, KF_FLUSH>(
      g, p.c.groups, ConvStore{p}, static_cast<cudaStream_t>(args->stream), ConvGather{p});
  if (err == cudaErrorInvalidConfiguration) return -7;
  return static_cast<int>(err);
}

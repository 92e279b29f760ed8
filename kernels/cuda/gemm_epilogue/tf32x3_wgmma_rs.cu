// Y = epilogue(X W^T + b) on Hopper's wgmma at fp32 accuracy (3xTF32), X's split in registers and
// the tiles brought by TMA: X [M, K], W [N, K] (both K-contiguous), b [N] optional, Y [M, N], all
// fp32. Needs sm_90a (family.toml cuda_arch).
//
// What it does differently from tf32x3_wgmma (both operands from shared memory, split there by
// every thread, cp.async copies), and what each step measured on an H100 at KernelBench L2/63
// (M 1024, K 8192, N 8192; bench/kernels/wgmma_tf32x3_probe.cu, compute_bound_s19.md), from
// tf32x3_wgmma's 2.42 ms:
// - X goes to the tensor cores from registers (wgmma's "RS" form): each thread loads its 16
//   values of a slice once (conflict-free 4-byte loads from the swizzled tile) and splits them
//   there; only W is read by the products from shared memory, and only W's lo part is written.
// - W's hi part is its raw value: the tensor cores read a tf32 operand's top 19 bits (sign,
//   exponent, 10 mantissa bits), so hi = trunc(w) costs nothing and lo = tf32(w - trunc(w)) is
//   the one buffer written. The gate checks that premise on every point: were the low bits read,
//   hi + lo would count them twice, an error of ~2^-11 that the fp32 precision rule rejects.
//   X is split the same way (tf32x3.cuh split_truncated: 4 instructions a value, where
//   cvt.rna.tf32 alone expands to 3-4 on sm_90).
// - The slice accumulator spans FLUSH slices before it is added to the fp32 sum, and slice s+1's
//   products are issued before slice s's are waited for (wait_group 1): the tensor cores stay
//   fed across slices. The accumulator's truncation then runs over 12 * FLUSH products: the
//   error on 8192-long sums of U[0, 1) products grows from 0.27x to 0.60x that of a sequential
//   fp32 loop at FLUSH 4 (1.16x at 8), which the gate's fp32 rule judges.
// - The shared tile pointer is offset from the shared array, not rounded through an integer: a
//   cast through uintptr_t had made every shared access a generic one (LD.E / ST.E in SASS).
// - TMA: thread 0 issues each slice's two boxes (128-byte swizzle, zero fill past M, N and K)
//   completing on a per-stage mbarrier; the 16-byte cp.async path it replaced cost ~100
//   instructions a slice a thread. Rows TMA cannot read (K % 4 != 0, unaligned bases) take
//   4-byte cp.async copies.
// - Blocks run in groups of 8 M tiles, M fastest within a group (gemm_wgmma_rs.cuh): at L2/63
//   (8 M tiles) the blocks resident at once share W's tiles, so W streams from DRAM about once;
//   at L2/40 (M 16384) X no longer streams once per N tile (pure M-fastest: 8.98 GB, 14.9x the
//   minimum), which measured the same time (5.24 vs 5.26 ms on an H100).
// 2.42 -> 2.29 (RS, FLUSH 4) -> 1.73 (copy addressing) -> 1.49 (shared, not generic, accesses;
// cheap split) -> 1.29 ms with TMA: 107 TFLOP/s of fp32 work, 320 TFLOP/s of TF32 products.
//
// The kernel itself lives in cuda/common/gemm_wgmma_rs.cuh (attention's unfused_wgmma_rs runs
// it too); this file gives it the gemm_epilogue store (bias, then the KF_EPILOGUE chain).
//
// Per slice a warpgroup issues 4 k-steps x 3 products (lo*hi, hi*lo, hi*hi: the small terms
// first) into the slice accumulator (scale-d 0 when it opens) and adds it to the running fp32 sum
// with ordinary adds every FLUSH slices: tensor cores truncate their accumulation
// (cuda/common/tf32x3.cuh). While the tensor cores work on slice s, the threads wait for slice
// s+1, split its W part, load and split its X part and put slice s+STAGES-1 in flight.
//
// Layouts: the A register fragment of wgmma m64nNk8 tf32 is mma.m16n8k8's per warp (wgmma.cuh);
// the accumulator layout is tf32x3_wgmma.cu's. The shared tiles are K-major with the 128-byte
// swizzle (16-byte chunk q of row r at chunk q ^ (r % 8)), which TMA's SWIZZLE_128B writes.
// Tails: boxes and copies past M, N or K zero-fill, stores are guarded.
// Limits: fewer than 2^31 tiles; beyond, cudaErrorInvalidConfiguration is returned.
//
// KernelBench L2/63: 137.4 GFLOP, 335.6 MB at least (410 FLOP/byte); 2x over eager's 2.72 ms
// is 101 TFLOP/s of fp32 work, 303 TFLOP/s in TF32 products (61% of the dense TF32 peak).
// Sources: PTX ISA 9.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma with A
// in registers, register fragments, the matrix descriptor), "cp.async.bulk.tensor"; NVIDIA
// CUTLASS (SM90 RS mainloops, 3xTF32 OpMultiplyAddFastF32); Ootomo & Yokota, IJHPCA 2022 (the
// split).
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cuda/common/gemm_wgmma_rs.cuh>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

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

/// y[row, col] = epilogue(v + bias[col]): the element of Y the GEMM's value v becomes.
struct EpilogueStore {
  float* y;
  const float* bias;  // null without a bias input
  int64_t n;
  kf::ep::Operands s;
  /// The stores of row `row` (gemm_wgmma_rs's Store): at(col, v).
  __device__ __forceinline__ auto row(int64_t, int64_t row) const {
    return [this, y_row = y + row * n](int64_t col, float v) {
      constexpr auto epilogue = KF_EPILOGUE;  // a compile-time chain: its scalar indices fold
      y_row[col] = epilogue(v + (bias != nullptr ? bias[col] : 0.0f), s, col);
    };
  }
};

}  // namespace

// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  kf::GemmArgs a;
  if (const int rc = kf::gemm_args(args, a); rc != 0) return rc;
  kf::wgmma_rs::Problem g;
  g.x = a.x;
  g.w = a.w;
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.ldx = g.ldw = a.k;
  g.batch_x = a.m * a.k;
  g.batch_w = a.n * a.k;
  const EpilogueStore store{a.y, a.bias, a.n, a.operands};
  return static_cast<int>(kf::wgmma_rs::launch<KF_BN, KF_STAGES, KF_FLUSH>(
      g, 1, store, static_cast<cudaStream_t>(args->stream)));
}

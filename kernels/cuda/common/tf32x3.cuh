// Warp-level tensor-core helpers of the gemm_epilogue and attention families (sm_80+): the 3xTF32
// split that keeps fp32 accuracy on TF32 tensor cores, the m16n8k8 TF32 mma.sync, cp.async
// wrappers that zero-fill out-of-range sources, and the tile loads, warp k-slice and multistage
// k-loop that both families' 3xTF32 GEMMs are made of.
//
// 3xTF32 (NVIDIA CUTLASS's OpMultiplyAddFastF32; Ootomo & Yokota, "Recovering single precision
// accuracy from Tensor Cores while surpassing the FP32 theoretical peak performance", IJHPCA 2022):
// a = a_hi + a_lo with a_hi = tf32(a) (10 mantissa bits, round to nearest away) and
// a_lo = tf32(a - a_hi); then a*b ~ a_hi*b_hi + a_hi*b_lo + a_lo*b_hi in fp32 accumulators (the
// lo*lo term, ~2^-22 relative, dropped). The small terms go first so they are not absorbed.
// Plain single TF32 (one mma on tf32(a), tf32(b)) errs by ~2^-11 relative per product: ~100x an
// fp32 computation's error, which kforge's fp32 precision rule rejects.
//
// m16n8k8 .tf32 fragment layout (PTX ISA 9.x, "Matrix Fragments for mma.m16n8k8"), with
// g = lane / 4 and t = lane % 4:
//   A (16 x 8, row-major):  a0 = (g, t)   a1 = (g + 8, t)   a2 = (g, t + 4)   a3 = (g + 8, t + 4)
//   B ( 8 x 8, "col"):      b0 = (k = t, n = g)              b1 = (k = t + 4, n = g)
//   C (16 x 8, fp32):       c0 = (g, 2t)  c1 = (g, 2t + 1)  c2 = (g + 8, 2t)  c3 = (g + 8, 2t + 1)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kf::tf32x3 {

/// fp32 -> tf32 (cvt.rna: round to nearest, ties away from zero); the result is an fp32 bit
/// pattern whose low 13 mantissa bits are zero.
__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(out) : "f"(v));
  return out;
}

/// The tf32 value a tensor core reads from an fp32 operand: its top 19 bits (sign, exponent, 10
/// mantissa bits), v truncated toward zero. Inf and NaN stay Inf and NaN, but for a NaN whose
/// payload lies only in the low 13 bits, which reads as Inf (as the tensor cores read it).
__device__ __forceinline__ uint32_t truncate_tf32(float v) {
  return __float_as_uint(v) & 0xFFFFE000u;
}

/// v rounded to tf32, to nearest with ties away from zero (cvt.rna's result), in two integer
/// instructions: half a tf32 ulp added to the magnitude bits, the low 13 cleared (on sm_90 ptxas
/// expands cvt.rna.tf32.f32 to a compare with Inf, a predicated add and the mask). Only for v
/// known finite and far below FLT_MAX, such as the remainder v - truncate_tf32(v): a NaN with a
/// large payload would carry into the sign bit.
__device__ __forceinline__ uint32_t round_small_tf32(float v) {
  return (__float_as_uint(v) + 0x1000u) & 0xFFFFE000u;
}

/// v = hi + lo with hi = truncate_tf32(v) and lo = the remainder v - hi (exact in fp32, below one
/// tf32 ulp of v) rounded to tf32: to ~2^-21 relative, in four instructions where split() takes
/// about ten on sm_90. The 3xTF32 products of the pair keep fp32 accuracy (Ootomo & Yokota,
/// IJHPCA 2022, section 3, bound the split's error by the remainder's rounding). A NaN or Inf v
/// gives a NaN or Inf hi (lo is then meaningless), so the products stay NaN or Inf.
__device__ __forceinline__ void split_truncated(float v, uint32_t& hi, uint32_t& lo) {
  hi = truncate_tf32(v);
  lo = round_small_tf32(v - __uint_as_float(hi));
}

/// v = hi + lo to ~2^-22 relative (both tf32 bit patterns).
__device__ __forceinline__ void split(float v, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(v);
  lo = to_tf32(v - __uint_as_float(hi));
}

/// d += a * b on one m16n8k8 tile: a 16x8 (row), b 8x8 (col), d 16x8 fp32 (layout above).
__device__ __forceinline__ void mma_m16n8k8(float (&d)[4], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// d += a * b in 3xTF32: three mma.sync (the two correction terms first) into a zeroed tile,
/// which is then added to d with ordinary fp32 adds. Tensor cores truncate their fp32
/// accumulation toward zero instead of rounding it (Fasi et al., "Numerical behavior of NVIDIA
/// tensor cores", PeerJ CS 2021); with d as the MMA's C operand the truncation of every k-step
/// would shrink |d| systematically, an error growing with K (emulated at K = 4097: 38x the fp32
/// model's, against 0.4x when the running sum stays outside; Ootomo and Yokota, IJHPCA 2022,
/// section 4, accumulate outside too).
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const uint32_t (&a_hi)[4],
                                           const uint32_t (&a_lo)[4], const uint32_t (&b_hi)[2],
                                           const uint32_t (&b_lo)[2]) {
  float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_m16n8k8(step, a_lo, b_hi);
  mma_m16n8k8(step, a_hi, b_lo);
  mma_m16n8k8(step, a_hi, b_hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += step[i];
}

/// Shared-memory address of p for the cp.async operands.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes global -> shared, asynchronously; reads only the first src_bytes (0 or 16
/// here) and zero-fills the rest. dst and src must be 16-byte aligned; src must be a valid
/// address even when src_bytes is 0 (pass the tensor's base).
__device__ __forceinline__ void cp_async_16(void* dst, const float* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

/// Copies 4 bytes global -> shared (src_bytes 0 writes a zero); for unaligned rows (K % 4 != 0).
__device__ __forceinline__ void cp_async_4(void* dst, const float* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

/// Closes the group of cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/// Waits until at most `Pending` committed groups are still in flight (this thread's copies).
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

/// The bytes of a 16-byte chunk at element `at` of a row of `len` floats that lie inside it.
__device__ __forceinline__ int chunk_bytes(int64_t at, int64_t len) {
  const int64_t left = len - at;
  return left >= 4 ? 16 : left > 0 ? static_cast<int>(left) * 4 : 0;
}

/// Issues the copies of tile [ROWS][COLS] of a row-major matrix (rows x cols, row stride ld) at
/// (row0, col0) into shared memory with row stride LD, zero-filling what lies outside the
/// matrix; THREADS threads, `tid` this one. kVec: 16-byte copies (rows 16-byte aligned; a chunk
/// straddling the end copies only its part inside), else 4-byte ones.
template <int ROWS, int COLS, int LD, int THREADS, bool kVec>
__device__ __forceinline__ void load_tile(float* tile, const float* src, int64_t rows,
                                          int64_t cols, int64_t ld, int64_t row0, int64_t col0,
                                          int tid) {
  if constexpr (kVec) {
    constexpr int kChunksPerRow = COLS / 4, kIters = ROWS * kChunksPerRow / THREADS;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / kChunksPerRow, c = (idx % kChunksPerRow) * 4;
      const int bytes = row0 + r < rows ? chunk_bytes(col0 + c, cols) : 0;
      const float* p = bytes > 0 ? src + (row0 + r) * ld + col0 + c : src;
      cp_async_16(tile + r * LD + c, p, bytes);
    }
  } else {
    constexpr int kIters = ROWS * COLS / THREADS;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / COLS, c = idx % COLS;
      const bool ok = row0 + r < rows && col0 + c < cols;
      const float* p = ok ? src + (row0 + r) * ld + col0 + c : src;
      cp_async_4(tile + r * LD + c, p, ok ? 4 : 0);
    }
  }
}

/// One BK-deep k-slice from shared memory into a warp's MI x NI m16n8 accumulators, 3xTF32.
/// a_s: the warp's rows of A, [m][LDS] (K-contiguous); b_s: the warp's columns of B, [n][LDS]
/// (NT: B K-contiguous, nn.Linear's weight) or, kNN, [k][LDB] (N-contiguous). g = lane / 4,
/// t = lane % 4 (the fragment layout above).
template <int BK, int MI, int NI, int LDS, int LDB, bool kNN>
__device__ __forceinline__ void warp_slice(const float* a_s, const float* b_s, int g, int t,
                                           float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int kk = 0; kk < BK; kk += 8) {
    uint32_t a_hi[MI][4], a_lo[MI][4], b_hi[NI][2], b_lo[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const float* p = a_s + (mi * 16 + g) * LDS + kk + t;
      split(p[0], a_hi[mi][0], a_lo[mi][0]);            // (g,     t)
      split(p[8 * LDS], a_hi[mi][1], a_lo[mi][1]);      // (g + 8, t)
      split(p[4], a_hi[mi][2], a_lo[mi][2]);            // (g,     t + 4)
      split(p[8 * LDS + 4], a_hi[mi][3], a_lo[mi][3]);  // (g + 8, t + 4)
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      if constexpr (kNN) {
        const float* p = b_s + (kk + t) * LDB + ni * 8 + g;  // B (k, n) at [k][n]
        split(p[0], b_hi[ni][0], b_lo[ni][0]);               // (k = t,     n = g)
        split(p[4 * LDB], b_hi[ni][1], b_lo[ni][1]);         // (k = t + 4, n = g)
      } else {
        const float* p = b_s + (ni * 8 + g) * LDS + kk + t;  // B (k, n) at [n][k]
        split(p[0], b_hi[ni][0], b_lo[ni][0]);               // (k = t,     n = g)
        split(p[4], b_hi[ni][1], b_lo[ni][1]);               // (k = t + 4, n = g)
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma_3xtf32(acc[mi][ni], a_hi[mi], a_lo[mi], b_hi[ni], b_lo[ni]);
  }
}

/// The multistage cp.async pipeline of a k-loop of `ktiles` slices (the structure of CUTLASS's
/// multistage mainloop): slices 0 .. STAGES-2 are put in flight first, one commit group each
/// (empty past the end, so the group count stays what wait_group<STAGES - 2> assumes); then for
/// each slice kt: wait until it landed (every thread's copies: a barrier), issue slice
/// kt + STAGES - 1 into the stage slice kt - 1 used, and compute on slice kt. No copy outlives
/// the call. `load_stage(stage, kt)` issues slice kt's copies into shared-memory stage `stage`;
/// `compute_stage(stage)` runs the math of the slice held there.
template <int STAGES, typename LoadStage, typename ComputeStage>
__device__ __forceinline__ void pipelined_k_loop(int ktiles, LoadStage&& load_stage,
                                                 ComputeStage&& compute_stage) {
  static_assert(STAGES >= 2, "a pipeline needs two stages or more");
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < ktiles) load_stage(st, st);
    cp_async_commit();
  }
#pragma unroll 1
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // slice kt has landed (this thread's copies)
    __syncthreads();              // ... everyone's; and everyone is done with slice kt-1's stage
    const int next = kt + STAGES - 1;
    if (next < ktiles) load_stage(next % STAGES, next);  // the stage slice kt-1 used
    cp_async_commit();
    compute_stage(kt % STAGES);
  }
  cp_async_wait<0>();
}

}  // namespace kf::tf32x3

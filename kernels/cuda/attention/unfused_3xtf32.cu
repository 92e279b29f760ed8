// O = softmax(Q K^T / sqrt(d)) V in three steps over a materialized score matrix, the two
// products on TF32 tensor cores at fp32 accuracy (3xTF32, kernels/cuda/common/tf32x3.cuh):
//   1. S = (Q K^T) / sqrt(d) per batch: an "NT" GEMM (both operands d-contiguous), M = N = s,
//      K = d, into a workspace [b, s, ld] (ld = s rounded up to 4 floats, rows 16-byte aligned);
//   2. each row of S replaced by its softmax, in place: one warp per row, max, sum of
//      exp(x - max), then p = exp(x - max) / sum (expf and IEEE division, as an fp32 computation);
//   3. O = P V per batch: an "NN" GEMM (V is d-contiguous), M = s, N = d, K = s.
// For large head dims (KernelBench's d = 1024), where a flash tile of Q and K/V does not fit in
// shared memory: the price is the workspace, b*s*ld*4 bytes (1 GiB at b = 1024, s = 512) from
// cudaMallocAsync on args->stream, and ~4 passes of it through memory (flash_simt avoids both).
//
// Both GEMMs: block tile BM x BN, k-slices BK deep through a STAGES-deep cp.async pipeline
// (sm_80+), 8 warps as 2 (M) x 4 (N), each warp a (BM/2) x (BN/4) tile of m16n8k8 accumulators;
// every fragment read from shared memory is split into hi/lo tf32 and each tile and k-step costs
// three mma.sync (the running sum stays outside the tensor cores: tf32x3.cuh says why).
// Shared tiles: A and the NT B keep the K-contiguous layout, rows padded by 4 floats (fragment
// reads hit banks 4g + t, all distinct); the NN B (V) is stored [BK][BN + 8] (reads (k = t,
// n = g) hit banks 8t + g, all distinct for BN = 64 or 128). Tails: a 16-byte copy that straddles
// the end of a row reads only its in-range floats and zero-fills the rest (cp.async src-size);
// rows past the matrix are zero-filled; stores are guarded. Operands whose rows are not 16-byte
// aligned (d % 4 != 0, or an unaligned base) take 4-byte copies instead.
// Limits: ceil(s / BM) <= 65535 (grid.y); batches are launched in chunks of 65535 (grid.z).
#include <common/attention_args.h>
#include <cuda/common/attention_softmax.cuh>
#include <cuda/common/elem.cuh>  // kf::aligned
#include <cuda/common/tf32x3.cuh>
#include <cuda/common/workspace.cuh>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
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
constexpr int kWarpsM = 2, kWarpsN = 4;  // 8 warps: enough to hide mma.sync latency per SM
constexpr int kThreads = kWarpsM * kWarpsN * 32;
constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;  // one warp's tile
constexpr int MI = WM / 16, NI = WN / 8;             // m16n8 tiles per warp
constexpr int LDS = BK + 4;                          // padded K-contiguous shared row, floats
constexpr int LDB = BN + 8;                          // padded N-contiguous shared row (NN B)
constexpr int kBFloats = BN * LDS > BK * LDB ? BN * LDS : BK * LDB;
constexpr int kStageFloats = BM * LDS + kBFloats;
constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStageFloats;
constexpr int64_t kMaxGridZ = 65535;

static_assert(BM % (16 * kWarpsM) == 0 && BN % (8 * kWarpsN) == 0, "warp tiles of m16n8");
static_assert(BN % 32 == 0, "BN: a multiple of 32 (NN B reads conflict-free with LDB = BN + 8)");
static_assert(BK % 8 == 0 && BK >= 8 && BK <= 64, "BK: a multiple of the mma's k = 8");
static_assert(STAGES >= 2 && STAGES <= 4, "STAGES in [2, 4]");
static_assert((BM * BK / 4) % kThreads == 0 && (BN * BK / 4) % kThreads == 0,
              "every thread issues the same number of 16-byte copies per stage");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");

/// One batched GEMM C = alpha * A B: A [M, K] with row stride lda; B [N, K] with row stride ldb
/// (kNN false: "NT") or [K, N] (kNN true: "NN"); C [M, N] with row stride ldc; batch i's
/// operands start at i * (a_batch, b_batch, c_batch) floats.
struct Gemm {
  const float* a;
  const float* b;
  float* c;
  int64_t m, n, k, lda, ldb, ldc, a_batch, b_batch, c_batch;
  float alpha;
};


template <bool kNN, bool kVec>
__global__ void __launch_bounds__(kThreads) gemm_tf32x3(Gemm gm, int64_t batch0) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  const int64_t batch = batch0 + blockIdx.z;
  const float* a = gm.a + batch * gm.a_batch;
  const float* b = gm.b + batch * gm.b_batch;
  float* c = gm.c + batch * gm.c_batch;
  const int64_t bm0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int ktiles = static_cast<int>((gm.k + BK - 1) / BK);

  auto load_stage = [&](int stage, int kt) {
    float* a_s = smem + stage * kStageFloats;
    const int64_t k0 = static_cast<int64_t>(kt) * BK;
    using kf::tf32x3::load_tile;
    load_tile<BM, BK, LDS, kThreads, kVec>(a_s, a, gm.m, gm.k, gm.lda, bm0, k0, tid);
    if constexpr (kNN) {
      load_tile<BK, BN, LDB, kThreads, kVec>(a_s + BM * LDS, b, gm.k, gm.n, gm.ldb, k0, bn0,
                                             tid);
    } else {
      load_tile<BN, BK, LDS, kThreads, kVec>(a_s + BM * LDS, b, gm.n, gm.k, gm.ldb, bn0, k0,
                                             tid);
    }
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
    const float* b_s = a_s + BM * LDS + (kNN ? wn * WN : wn * WN * LDS);
    kf::tf32x3::warp_slice<BK, MI, NI, LDS, LDB, kNN>(a_s + wm * WM * LDS, b_s, g, t, acc);
  });

  // Store: c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at (g + 8, ...).
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = bm0 + wm * WM + mi * 16 + g + half * 8;
      if (row >= gm.m) continue;
      float* c_row = c + row * gm.ldc;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int64_t col = bn0 + wn * WN + ni * 8 + 2 * t;
        if (col < gm.n) c_row[col] = acc[mi][ni][2 * half] * gm.alpha;
        if (col + 1 < gm.n) c_row[col + 1] = acc[mi][ni][2 * half + 1] * gm.alpha;
      }
    }
}

template <bool kNN, bool kVec>
cudaError_t launch_gemm(const Gemm& gm, int64_t batches, cudaStream_t stream) {
  auto kernel = gemm_tf32x3<kNN, kVec>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in (a host-side attribute, no sync);
  // once per process and instantiation, so the timed calls do not pay for it.
  static const cudaError_t opted_in = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (opted_in != cudaSuccess) return opted_in;
  cudaError_t err = cudaSuccess;
  for (int64_t batch0 = 0; batch0 < batches; batch0 += kMaxGridZ) {
    const int64_t chunk = batches - batch0 < kMaxGridZ ? batches - batch0 : kMaxGridZ;
    const dim3 grid(static_cast<unsigned>((gm.n + BN - 1) / BN),
                    static_cast<unsigned>((gm.m + BM - 1) / BM), static_cast<unsigned>(chunk));
    kernel<<<grid, kThreads, kSmemBytes, stream>>>(gm, batch0);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

template <bool kNN>
cudaError_t launch_gemm(const Gemm& gm, bool vec, int64_t batches, cudaStream_t stream) {
  return vec ? launch_gemm<kNN, true>(gm, batches, stream)
             : launch_gemm<kNN, false>(gm, batches, stream);
}

// The three steps on workspace p [b, s, ld].
cudaError_t attend(const kf::AttentionArgs& a, float* p, int64_t ld, cudaStream_t stream) {
  const int64_t sd = a.s * a.d;
  const Gemm scores{a.q, a.k, p, a.s, a.s, a.d, a.d, a.d, ld, sd, sd, a.s * ld,
                    1.0f / std::sqrt(static_cast<float>(a.d))};
  const bool vec_qk = a.d % 4 == 0 && kf::aligned(a.q, 16) && kf::aligned(a.k, 16);
  cudaError_t err = launch_gemm<false>(scores, vec_qk, a.b, stream);
  if (err != cudaSuccess) return err;
  err = kf::attention::softmax_rows_in_place(p, a.b * a.s, a.s, ld, stream);
  if (err != cudaSuccess) return err;
  const Gemm weighted{p, a.v, a.o, a.s, a.d, a.s, ld, a.d, a.d, a.s * ld, sd, sd, 1.0f};
  const bool vec_v = a.d % 4 == 0 && kf::aligned(a.v, 16);  // p's rows are 16-byte aligned
  return launch_gemm<true>(weighted, vec_v, a.b, stream);
}

}  // namespace

// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the allocation, a launch or the free.
KFORGE_API int kforge_run(const kforge_args* args) {
  kf::AttentionArgs a;
  if (const int rc = kf::attention_args(args, a); rc != 0) return rc;
  if (a.b == 0 || a.s == 0 || a.d == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  const int64_t ld = (a.s + 3) / 4 * 4;  // 16-byte aligned rows for the second GEMM's A
  void* workspace = nullptr;
  cudaError_t err = kf::workspace::allocate(&workspace, sizeof(float) * a.b * a.s * ld, stream);
  if (err != cudaSuccess) return static_cast<int>(err);
  err = attend(a, static_cast<float*>(workspace), ld, stream);
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  return static_cast<int>(err != cudaSuccess ? err : freed);
}

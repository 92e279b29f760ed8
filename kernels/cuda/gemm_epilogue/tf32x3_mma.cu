// Y = epilogue(X W^T + b) on TF32 tensor cores at fp32 accuracy (3xTF32, kernels/cuda/common/
// tf32x3.cuh): X [M, K], W [N, K] (both K-contiguous), b [N] optional, Y [M, N], all fp32.
//
// Block tile BM x BN, k-slices BK deep, STAGES-deep cp.async pipeline (sm_80+): while the block
// computes slice kt, slices kt+1 .. kt+STAGES-1 are in flight. 8 warps as 2 (M) x 4 (N); a warp
// owns a (BM/2) x (BN/4) tile of m16n8k8 accumulators in registers, splits each fragment it reads
// from shared memory into hi/lo tf32 and issues three mma.sync per tile and k-step. Bias and the
// epilogue are applied as the accumulators are stored.
//
// Shared tiles keep the global K-contiguous layout, rows padded by 4 floats: the fragment reads
// (row g, column t) then hit banks 4g + t (mod 32) for row strides of 12, 20 or 36 floats, all 32
// distinct, and every row stays 16-byte aligned for cp.async.
// Tails: loads past M, N or K are zero-filled (cp.async src-size 0), stores are guarded. Rows that
// are not 16-byte aligned (K % 4 != 0, or an unaligned base) take 4-byte cp.async instead.
// Limits: ceil(M / BM) <= 65535 (grid.y); beyond it the launch error is returned.
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cuda/common/elem.cuh>  // kf::aligned
#include <cuda/common/tf32x3.cuh>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

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
constexpr int LDS = BK + 4;                          // padded shared row, floats
constexpr int kStageFloats = (BM + BN) * LDS;
constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStageFloats;

static_assert(BM % (16 * kWarpsM) == 0 && BN % (8 * kWarpsN) == 0, "warp tiles of m16n8");
static_assert(BK % 8 == 0 && BK >= 8 && BK <= 64, "BK: a multiple of the mma's k = 8");
static_assert(STAGES >= 2 && STAGES <= 4, "STAGES in [2, 4]");
static_assert((BM * BK / 4) % kThreads == 0 && (BN * BK / 4) % kThreads == 0,
              "every thread issues the same number of 16-byte copies per stage");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");

// Issues the copies of one k-slice (rows [row0, row0 + ROWS) x k [k0, k0 + BK) of a [rows, K]
// matrix) into a shared tile [ROWS][LDS], zero-filling out-of-range elements.
template <int ROWS, bool kVec>
__device__ __forceinline__ void load_tile(float* tile, const float* src, int64_t rows, int64_t K,
                                          int64_t row0, int64_t k0, int tid) {
  using namespace kf::tf32x3;
  if constexpr (kVec) {
    constexpr int kChunksPerRow = BK / 4, kIters = ROWS * kChunksPerRow / kThreads;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * 4;
      // K % 4 == 0 on this path, so a chunk is entirely in or entirely out of range.
      const bool ok = row0 + r < rows && k0 + kc < K;
      const float* p = ok ? src + (row0 + r) * K + k0 + kc : src;
      cp_async_16(tile + r * LDS + kc, p, ok ? 16 : 0);
    }
  } else {
    constexpr int kIters = ROWS * BK / kThreads;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / BK, kk = c % BK;
      const bool ok = row0 + r < rows && k0 + kk < K;
      const float* p = ok ? src + (row0 + r) * K + k0 + kk : src;
      cp_async_4(tile + r * LDS + kk, p, ok ? 4 : 0);
    }
  }
}

// One k-slice from shared memory into the warp's accumulators.
__device__ __forceinline__ void compute_slice(const float* a_s, const float* b_s, int g, int t,
                                              float (&acc)[MI][NI][4]) {
  using namespace kf::tf32x3;
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
      const float* p = b_s + (ni * 8 + g) * LDS + kk + t;  // W[n][k] is B (k, n) column-major
      split(p[0], b_hi[ni][0], b_lo[ni][0]);               // (k = t,     n = g)
      split(p[4], b_hi[ni][1], b_lo[ni][1]);               // (k = t + 4, n = g)
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma_3xtf32(acc[mi][ni], a_hi[mi], a_lo[mi], b_hi[ni], b_lo[ni]);
  }
}

template <bool kVec>
__global__ void __launch_bounds__(kThreads)
gemm_tf32x3(const float* __restrict__ x, const float* __restrict__ w,
            const float* __restrict__ bias, float* __restrict__ y, int64_t M, int64_t N,
            int64_t K, kf::ep::Scalars s, bool pair_stores) {
  // The chain is a compile-time constant here, so its scalar indices fold (passed as a kernel
  // argument they would be runtime indices into s.v, which then lives in local memory).
  constexpr auto epilogue = KF_EPILOGUE;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  const int64_t bm0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int ktiles = static_cast<int>((K + BK - 1) / BK);

  auto load_stage = [&](int stage, int kt) {
    float* a_s = smem + stage * kStageFloats;
    load_tile<BM, kVec>(a_s, x, M, K, bm0, static_cast<int64_t>(kt) * BK, tid);
    load_tile<BN, kVec>(a_s + BM * LDS, w, N, K, bn0, static_cast<int64_t>(kt) * BK, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.0f;

  kf::tf32x3::pipelined_k_loop<STAGES>(ktiles, load_stage, [&](int stage) {
    const float* a_s = smem + stage * kStageFloats;
    compute_slice(a_s + wm * WM * LDS, a_s + BM * LDS + wn * WN * LDS, g, t, acc);
  });

  // Store: c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at (g + 8, ...).
  float b_col[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t col = bn0 + wn * WN + ni * 8 + 2 * t + j;
      b_col[ni][j] = bias != nullptr && col < N ? bias[col] : 0.0f;
    }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = bm0 + wm * WM + mi * 16 + g + half * 8;
      if (row >= M) continue;
      float* y_row = y + row * N;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int64_t col = bn0 + wn * WN + ni * 8 + 2 * t;
        const float v0 = epilogue(acc[mi][ni][2 * half] + b_col[ni][0], s.v);
        const float v1 = epilogue(acc[mi][ni][2 * half + 1] + b_col[ni][1], s.v);
        if (pair_stores && col < N) {  // N even: col + 1 < N too, and 8-byte aligned
          *reinterpret_cast<float2*>(y_row + col) = make_float2(v0, v1);
        } else {
          if (col < N) y_row[col] = v0;
          if (col + 1 < N) y_row[col + 1] = v1;
        }
      }
    }
}

template <bool kVec>
int launch(const kf::GemmArgs& a, cudaStream_t stream) {
  auto kernel = gemm_tf32x3<kVec>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in (a host-side attribute, no sync).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSmemBytes));
  if (err != cudaSuccess) return static_cast<int>(err);
  const dim3 grid(static_cast<unsigned>((a.n + BN - 1) / BN),
                  static_cast<unsigned>((a.m + BM - 1) / BM));
  const bool pairs = a.n % 2 == 0 && kf::aligned(a.y, 8);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(a.x, a.w, a.bias, a.y, a.m, a.n, a.k, a.scalars,
                                                 pairs);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  kf::GemmArgs a;
  if (const int rc = kf::gemm_args(args, a); rc != 0) return rc;
  if (a.m == 0 || a.n == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  const bool vec = a.k % 4 == 0 && kf::aligned(a.x, 16) && kf::aligned(a.w, 16);
  return vec ? launch<true>(a, stream) : launch<false>(a, stream);
}

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

template <bool kVec>
__global__ void __launch_bounds__(kThreads)
gemm_tf32x3(const float* __restrict__ x, const float* __restrict__ w,
            const float* __restrict__ bias, float* __restrict__ y, int64_t M, int64_t N,
            int64_t K, kf::ep::Operands s, bool pair_stores) {
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
    const int64_t k0 = static_cast<int64_t>(kt) * BK;
    using kf::tf32x3::load_tile;
    load_tile<BM, BK, LDS, kThreads, kVec>(a_s, x, M, K, K, bm0, k0, tid);
    load_tile<BN, BK, LDS, kThreads, kVec>(a_s + BM * LDS, w, N, K, K, bn0, k0, tid);
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
    kf::tf32x3::warp_slice<BK, MI, NI, LDS, LDS, false>(a_s + wm * WM * LDS,
                                                      a_s + BM * LDS + wn * WN * LDS, g, t, acc);
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
        const float v0 = epilogue(acc[mi][ni][2 * half] + b_col[ni][0], s, col);
        const float v1 = epilogue(acc[mi][ni][2 * half + 1] + b_col[ni][1], s, col + 1);
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
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(a.x, a.w, a.bias, a.y, a.m, a.n, a.k, a.operands,
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

// Y = epilogue(X W^T + b) in fp32 FMA (SIMT, no tensor cores): X [M, K], W [N, K] (both
// K-contiguous), b [N] optional, Y [M, N], all fp32. The classic register-blocked SGEMM
// (V. Volkov & J. Demmel, "Benchmarking GPUs to tune dense linear algebra", SC08; the structure of
// CUTLASS's SIMT sgemm) with the bias and epilogue fused into the store.
//
// Block tile BM x BN; k advances in BK-deep slices staged through two shared buffers: the next
// slice's global loads are issued into registers before this slice's FMAs and stored to the other
// buffer after them, so one __syncthreads per slice. Each of the BM*BN/TT^2 threads accumulates a
// TT x TT register tile, taken as TT/4 groups of 4 rows (and of 4 columns) spread BM*4/TT apart,
// so a quarter warp's float4 shared reads are 128 consecutive bytes (no bank conflicts).
// Shared tiles are stored transposed, [BK][BM + 4] and [BK][BN + 4]: a k-step reads a row of each.
// Tails: out-of-range loads read as zero, stores are guarded; rows that are not 16-byte aligned
// (K % 4 != 0 or an unaligned base) take scalar loads. Limits: ceil(M / BM) <= 65535 (grid.y).
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cuda/common/elem.cuh>  // kf::aligned
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cstdint>

#ifndef KF_BM
#define KF_BM 128
#endif
#ifndef KF_BN
#define KF_BN 128
#endif
#ifndef KF_BK
#define KF_BK 16
#endif
#ifndef KF_THREAD_TILE
#define KF_THREAD_TILE 8
#endif

namespace {

constexpr int BM = KF_BM, BN = KF_BN, BK = KF_BK, TT = KF_THREAD_TILE;
constexpr int kThreadsM = BM / TT, kThreadsN = BN / TT;  // thread grid of the block tile
constexpr int kThreads = kThreadsM * kThreadsN;
constexpr int kGroups = TT / 4;  // float4 groups per thread along M and along N
constexpr int LDA = BM + 4, LDB = BN + 4;  // padded, still 16-byte aligned rows
constexpr size_t kSmemBytes = sizeof(float) * 2 * BK * (LDA + LDB);

static_assert(TT == 4 || TT == 8, "THREAD_TILE is 4 or 8 (float4 groups)");
static_assert(BM % TT == 0 && BN % TT == 0, "the thread tile divides the block tile");
static_assert(kThreads >= 32 && kThreads <= 1024 && kThreads % 32 == 0,
              "BM*BN/THREAD_TILE^2 threads: whole warps, at most 1024");
static_assert(BK % 4 == 0 && BK >= 4, "BK: whole float4 chunks");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");

// Registers that carry one slice of a [rows, K] operand from global to shared memory.
template <int ROWS, int V>
struct Staging {
  static constexpr int kChunksPerRow = BK / V, kChunks = ROWS * kChunksPerRow;
  static constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
  float v[kIters][V];

  // Loads rows [row0, row0 + ROWS) x k [k0, k0 + BK); out of range reads 0. V == 4 only when
  // K % 4 == 0 and the base is 16-byte aligned, so a chunk is entirely in or out of range.
  __device__ __forceinline__ void load(const float* __restrict__ src, int64_t rows, int64_t K,
                                       int64_t row0, int64_t k0, int tid) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * V;
      const bool ok = c < kChunks && row0 + r < rows && k0 + kc < K;
      if constexpr (V == 4) {
        float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (ok) t = __ldg(reinterpret_cast<const float4*>(src + (row0 + r) * K + k0 + kc));
        v[i][0] = t.x; v[i][1] = t.y; v[i][2] = t.z; v[i][3] = t.w;
      } else {
        v[i][0] = ok ? __ldg(src + (row0 + r) * K + k0 + kc) : 0.0f;
      }
    }
  }

  // Stores into tile[k][row] (row stride LD), transposing.
  template <int LD>
  __device__ __forceinline__ void store(float* tile, int tid) const {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = tid + i * kThreads;
      if (c >= kChunks) break;
      const int r = c / kChunksPerRow, kc = (c % kChunksPerRow) * V;
#pragma unroll
      for (int j = 0; j < V; ++j) tile[(kc + j) * LD + r] = v[i][j];
    }
  }
};

template <int V>
__global__ void __launch_bounds__(kThreads)
gemm_simt(const float* __restrict__ x, const float* __restrict__ w,
          const float* __restrict__ bias, float* __restrict__ y, int64_t M, int64_t N, int64_t K,
          kf::ep::Operands s, bool vec_stores) {
  // The chain is a compile-time constant here, so its scalar indices fold (passed as a kernel
  // argument they would be runtime indices into s.v, which then lives in local memory).
  constexpr auto epilogue = KF_EPILOGUE;
  extern __shared__ __align__(16) float smem[];
  // Buffer c of A at smem + c * BK * LDA, of B after both A buffers (offsets, not a pointer
  // array: an array indexed by the loop's parity would live in local memory).
  float* const b_base = smem + 2 * BK * LDA;
  const int tid = threadIdx.x;
  const int tx = tid % kThreadsN, ty = tid / kThreadsN;
  const int64_t bm0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int ktiles = static_cast<int>((K + BK - 1) / BK);

  float acc[TT][TT];
#pragma unroll
  for (int i = 0; i < TT; ++i)
#pragma unroll
    for (int j = 0; j < TT; ++j) acc[i][j] = 0.0f;

  Staging<BM, V> stage_a;
  Staging<BN, V> stage_b;
  if (ktiles > 0) {
    stage_a.load(x, M, K, bm0, 0, tid);
    stage_b.load(w, N, K, bn0, 0, tid);
    stage_a.template store<LDA>(smem, tid);
    stage_b.template store<LDB>(b_base, tid);
  }
  __syncthreads();

#pragma unroll 1
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {  // in flight during the FMAs below
      stage_a.load(x, M, K, bm0, static_cast<int64_t>(kt + 1) * BK, tid);
      stage_b.load(w, N, K, bn0, static_cast<int64_t>(kt + 1) * BK, tid);
    }
    const float* a_k = smem + cur * BK * LDA + ty * 4;
    const float* b_k = b_base + cur * BK * LDB + tx * 4;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TT], b[TT];
#pragma unroll
      for (int gi = 0; gi < kGroups; ++gi) {
        const float4 av = *reinterpret_cast<const float4*>(a_k + k * LDA + gi * kThreadsM * 4);
        const float4 bv = *reinterpret_cast<const float4*>(b_k + k * LDB + gi * kThreadsN * 4);
        a[gi * 4 + 0] = av.x; a[gi * 4 + 1] = av.y; a[gi * 4 + 2] = av.z; a[gi * 4 + 3] = av.w;
        b[gi * 4 + 0] = bv.x; b[gi * 4 + 1] = bv.y; b[gi * 4 + 2] = bv.z; b[gi * 4 + 3] = bv.w;
      }
#pragma unroll
      for (int i = 0; i < TT; ++i)
#pragma unroll
        for (int j = 0; j < TT; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) {  // the other buffer: everyone finished reading it before the last barrier
      stage_a.template store<LDA>(smem + (cur ^ 1) * BK * LDA, tid);
      stage_b.template store<LDB>(b_base + (cur ^ 1) * BK * LDB, tid);
    }
    __syncthreads();
  }

  // Thread element (i, j) sits at row (i/4)*kThreadsM*4 + ty*4 + i%4 and column
  // (j/4)*kThreadsN*4 + tx*4 + j%4 of the block tile.
  float b_col[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const int64_t col = bn0 + (j / 4) * kThreadsN * 4 + tx * 4 + j % 4;
    b_col[j] = bias != nullptr && col < N ? bias[col] : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < TT; ++i) {
    const int64_t row = bm0 + (i / 4) * kThreadsM * 4 + ty * 4 + i % 4;
    if (row >= M) continue;
    float* y_row = y + row * N;
#pragma unroll
    for (int gj = 0; gj < kGroups; ++gj) {
      const int64_t col = bn0 + gj * kThreadsN * 4 + tx * 4;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = epilogue(acc[i][gj * 4 + j] + b_col[gj * 4 + j], s, col + j);
      if (vec_stores && col < N) {  // N % 4 == 0 and col % 4 == 0: col + 3 < N
        *reinterpret_cast<float4*>(y_row + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < N) y_row[col + j] = v[j];
      }
    }
  }
}

template <int V>
int launch(const kf::GemmArgs& a, cudaStream_t stream) {
  auto kernel = gemm_simt<V>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in (a host-side attribute, no sync).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSmemBytes));
  if (err != cudaSuccess) return static_cast<int>(err);
  const dim3 grid(static_cast<unsigned>((a.n + BN - 1) / BN),
                  static_cast<unsigned>((a.m + BM - 1) / BM));
  const bool vec_stores = a.n % 4 == 0 && kf::aligned(a.y, 16);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(a.x, a.w, a.bias, a.y, a.m, a.n, a.k, a.operands,
                                                 vec_stores);
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
  return vec ? launch<4>(a, stream) : launch<1>(a, stream);
}

// O = softmax(Q K^T / sqrt(d)) V on fp32 FMA units, flash-style (FlashAttention, Dao et al. 2022,
// Algorithm 1; online softmax: Milakov & Gimelshein 2018): q, k, v, o [b, s, d], fp32.
//
// A block owns BQ query rows of one batch and D_CHUNK output columns. It walks the keys in tiles
// of BK: the BQ x BK scores are accumulated over d in D_CHUNK-wide slices of Q and K staged in
// shared memory (Q stays resident when d <= D_CHUNK), then each row's running max m and sum l
// are raised by the tile (rescaling the row's output accumulators by exp(m - m')), the tile's
// weights p = exp(score - m') go to shared memory, and the V tile's D_CHUNK columns are added
// in, acc += P V. o = acc / l at the end; no s x s matrix is ever stored.
// Threads: THREADS = 16 x TY; thread (ty, tx) owns rows ty * RQ .. + RQ (RQ = BQ / TY) of both
// the score tile (keys tx + 16 jj) and the output tile (columns tx + 16 cc), so a row's max and
// sum are reduced over the 16 lanes of a half warp with shuffles.
// Any d is correct: d > D_CHUNK splits the output columns over gridDim.y = ceil(d / D_CHUNK)
// blocks, each of which recomputes the full scores, so Q K^T's work is done ceil(d / D_CHUNK)
// times (at KernelBench's d = 1024 and D_CHUNK = 128, 8x: use unfused_3xtf32 there). Tails (s, d
// not multiples of the tiles) are zero-filled in shared memory, keys past s get weight 0, and
// stores are guarded. Exact fp32 arithmetic (expf, IEEE division), sums in d order per thread.
// Shared memory: (BQ + BK) * (D_CHUNK + 1) + BQ * (BK + 1) floats (V reuses K's slice buffer);
// rows padded by one float so the per-thread row and key walks hit distinct banks.
#include <common/attention_args.h>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#ifndef KF_BQ
#define KF_BQ 32
#endif
#ifndef KF_BK
#define KF_BK 64
#endif
#ifndef KF_THREADS
#define KF_THREADS 128
#endif
#ifndef KF_D_CHUNK
#define KF_D_CHUNK 64
#endif

namespace {

constexpr int BQ = KF_BQ, BK = KF_BK, kThreads = KF_THREADS, DC = KF_D_CHUNK;
constexpr int TX = 16;                 // lanes sharing a row group: a half warp
constexpr int TY = kThreads / TX;
constexpr int RQ = BQ / TY;            // query rows per thread
constexpr int KJ = BK / TX;            // keys per thread in a score tile
constexpr int CC = DC / TX;            // output columns per thread
constexpr int LD = DC + 1;             // padded row of the Q and K/V slices, floats
constexpr int LDP = BK + 1;            // padded row of the weight tile
constexpr int kSmemFloats = (BQ + BK) * LD + BQ * LDP;
constexpr size_t kSmemBytes = sizeof(float) * kSmemFloats;

static_assert(kThreads % 32 == 0 && kThreads >= 64 && kThreads <= 512, "THREADS: 64..512 warps");
static_assert(BQ % TY == 0 && RQ >= 1, "BQ must be a multiple of THREADS / 16");
static_assert(BK % TX == 0 && DC % TX == 0, "BK and D_CHUNK: multiples of 16");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");

// tile[r][c] = src[(row0 + r) * d + col0 + c] for r < ROWS, c < DC, zero outside [rows, d).
template <int ROWS>
__device__ __forceinline__ void load_slice(float* tile, const float* src, int64_t rows,
                                           int64_t d, int64_t row0, int64_t col0) {
  for (int i = threadIdx.x; i < ROWS * DC; i += kThreads) {
    const int r = i / DC, c = i % DC;
    const bool ok = row0 + r < rows && col0 + c < d;
    tile[r * LD + c] = ok ? src[(row0 + r) * d + col0 + c] : 0.0f;
  }
}

// Sum over the 16 lanes of this half warp (every lane gets it).
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
  for (int o = TX / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
  for (int o = TX / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__global__ void __launch_bounds__(kThreads)
flash_simt(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
           float* __restrict__ o, int64_t batches, int64_t s, int64_t d, float scale) {
  extern __shared__ float smem[];
  float* q_s = smem;            // [BQ][LD]
  float* kv_s = q_s + BQ * LD;  // [BK][LD]: K's slice, then V's tile
  float* p_s = kv_s + BK * LD;  // [BQ][LDP]
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BQ;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * DC;
  const bool q_resident = d <= DC;

  for (int64_t batch = blockIdx.z; batch < batches; batch += gridDim.z) {
    const int64_t offset = batch * s * d;
    const float* qb = q + offset;
    const float* kb = k + offset;
    const float* vb = v + offset;
    float row_max[RQ], row_sum[RQ], acc[RQ][CC];
#pragma unroll
    for (int r = 0; r < RQ; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
#pragma unroll
      for (int c = 0; c < CC; ++c) acc[r][c] = 0.0f;
    }
    __syncthreads();  // the previous batch's readers of q_s are done
    if (q_resident) load_slice<BQ>(q_s, qb, s, d, row0, 0);

    for (int64_t j0 = 0; j0 < s; j0 += BK) {
      float score[RQ][KJ];
#pragma unroll
      for (int r = 0; r < RQ; ++r)
#pragma unroll
        for (int jj = 0; jj < KJ; ++jj) score[r][jj] = 0.0f;
      for (int64_t d0 = 0; d0 < d; d0 += DC) {
        __syncthreads();  // readers of the previous slices (and of V and P) are done
        if (!q_resident) load_slice<BQ>(q_s, qb, s, d, row0, d0);
        load_slice<BK>(kv_s, kb, s, d, j0, d0);
        __syncthreads();
        const int width = static_cast<int>(d - d0 < DC ? d - d0 : DC);  // columns past d are 0
#pragma unroll 4
        for (int c = 0; c < width; ++c) {
          float qv[RQ], kv[KJ];
#pragma unroll
          for (int r = 0; r < RQ; ++r) qv[r] = q_s[(ty * RQ + r) * LD + c];
#pragma unroll
          for (int jj = 0; jj < KJ; ++jj) kv[jj] = kv_s[(tx + TX * jj) * LD + c];
#pragma unroll
          for (int r = 0; r < RQ; ++r)
#pragma unroll
            for (int jj = 0; jj < KJ; ++jj) score[r][jj] = fmaf(qv[r], kv[jj], score[r][jj]);
        }
      }
      // Online softmax over this key tile; keys past s weigh 0.
#pragma unroll
      for (int r = 0; r < RQ; ++r) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < KJ; ++jj) {
          score[r][jj] = j0 + tx + TX * jj < s ? score[r][jj] * scale : -INFINITY;
          tile_max = fmaxf(tile_max, score[r][jj]);
        }
        // Key j0 (tx = 0, jj = 0) is always in range, so new_max is finite.
        const float new_max = fmaxf(row_max[r], half_warp_max(tile_max));
        const float correction = expf(row_max[r] - new_max);  // 0 on the first tile
        float tile_sum = 0.0f;
#pragma unroll
        for (int jj = 0; jj < KJ; ++jj) {
          const float p = expf(score[r][jj] - new_max);
          tile_sum += p;
          p_s[(ty * RQ + r) * LDP + tx + TX * jj] = p;
        }
        row_sum[r] = row_sum[r] * correction + half_warp_sum(tile_sum);
        row_max[r] = new_max;
#pragma unroll
        for (int c = 0; c < CC; ++c) acc[r][c] *= correction;
      }
      __syncthreads();  // everyone is done with K's slice; P is complete
      load_slice<BK>(kv_s, vb, s, d, j0, col0);
      __syncthreads();
      const int keys = static_cast<int>(s - j0 < BK ? s - j0 : BK);  // the rest weigh 0
#pragma unroll 4
      for (int j = 0; j < keys; ++j) {
        float vv[CC];
#pragma unroll
        for (int c = 0; c < CC; ++c) vv[c] = kv_s[j * LD + tx + TX * c];
#pragma unroll
        for (int r = 0; r < RQ; ++r) {
          const float p = p_s[(ty * RQ + r) * LDP + j];
#pragma unroll
          for (int c = 0; c < CC; ++c) acc[r][c] = fmaf(p, vv[c], acc[r][c]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RQ; ++r) {
      const int64_t row = row0 + ty * RQ + r;
      if (row >= s) continue;
#pragma unroll
      for (int c = 0; c < CC; ++c) {
        const int64_t col = col0 + tx + TX * c;
        if (col < d) o[offset + row * d + col] = acc[r][c] / row_sum[r];
      }
    }
  }
}

}  // namespace

// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  kf::AttentionArgs a;
  if (const int rc = kf::attention_args(args, a); rc != 0) return rc;
  if (a.b == 0 || a.s == 0 || a.d == 0) return 0;
  // Above 48 KiB of dynamic shared memory a kernel must opt in (a host-side attribute, no sync);
  // once per process, so the timed calls of a small workload do not pay for it.
  static const cudaError_t opted_in = cudaFuncSetAttribute(
      flash_simt, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (opted_in != cudaSuccess) return static_cast<int>(opted_in);
  constexpr int64_t kMaxGridZ = 65535;  // more batches: the kernel loops over them
  const dim3 grid(static_cast<unsigned>((a.s + BQ - 1) / BQ),
                  static_cast<unsigned>((a.d + DC - 1) / DC),
                  static_cast<unsigned>(a.b < kMaxGridZ ? a.b : kMaxGridZ));
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  flash_simt<<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(args->stream)>>>(
      a.q, a.k, a.v, a.o, a.b, a.s, a.d, scale);
  return static_cast<int>(cudaGetLastError());
}

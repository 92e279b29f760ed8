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
// - Blocks are rasterized M-fastest (blockIdx.x the M tile): the blocks resident at once share
//   W's tiles, so W (nn.Linear's large operand) streams from DRAM about once.
// 2.42 -> 2.29 (RS, FLUSH 4) -> 1.73 (copy addressing) -> 1.49 (shared, not generic, accesses;
// cheap split) -> 1.29 ms with TMA: 107 TFLOP/s of fp32 work, 320 TFLOP/s of TF32 products.
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
// Limits: ceil(N / BN) <= 65535 (grid.y); beyond it the launch error is returned.
//
// KernelBench L2/63: 137.4 GFLOP, 335.6 MB at least (410 FLOP/byte); 2x over eager's 2.72 ms
// is 101 TFLOP/s of fp32 work, 303 TFLOP/s in TF32 products (61% of the dense TF32 peak).
// Sources: PTX ISA 9.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma with A
// in registers, register fragments, the matrix descriptor), "cp.async.bulk.tensor"; NVIDIA
// CUTLASS (SM90 RS mainloops, 3xTF32 OpMultiplyAddFastF32); Ootomo & Yokota, IJHPCA 2022 (the
// split).
#include <common/epilogue.h>
#include <common/gemm_args.h>
#include <cuda/common/tf32x3.cuh>
#include <cuda/common/tma.cuh>
#include <kforge/kernel.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define KF_HAVE_WGMMA 1
#include <cuda/common/wgmma.cuh>
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

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

using kf::tf32x3::round_small_tf32;
using kf::tf32x3::truncate_tf32;

constexpr int BN = KF_BN, STAGES = KF_STAGES, FLUSH = KF_FLUSH;
constexpr int kBM = 128, kBK = 32, kThreads = 256;
constexpr int kTileA = kBM * kBK, kTileB = BN * kBK;  // floats
// X raw, W raw (its hi part), W lo: each a multiple of 1024 bytes, so every part stays
// 1024-byte aligned (the 128-byte swizzle's atom).
constexpr int kStageFloats = kTileA + 2 * kTileB;
constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStageFloats + 1024;  // + alignment

static_assert(BN == 64 || BN == 128, "BN: the wgmma N of the warpgroup tile, 64 or 128");
static_assert(FLUSH >= 1, "FLUSH: slices a slice accumulator spans, 1 or more");
static_assert(STAGES >= 3, "the ring holds the slice in the tensor cores, the one being split "
                           "and the one loading");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB): fewer STAGES");

/// Issues 4-byte copies of rows [row0, row0 + ROWS) x k-slice [k0, k0 + 32) of a K-major matrix
/// (rows x K) into `tile` in the 128-byte-swizzled layout, zero-filling what lies outside: the
/// path of rows the tensor memory accelerator cannot read (K % 4 != 0, an unaligned base).
template <int ROWS>
__device__ __forceinline__ void load_swizzled_4(float* tile, const float* src, int64_t rows,
                                                int64_t K, int64_t row0, int64_t k0, int tid) {
  constexpr int kElements = ROWS * kBK;
  static_assert(kElements % kThreads == 0, "whole copies per thread");
  // Not unrolled whole: 16 address pairs a thread live at once spill at BN 128.
#pragma unroll 4
  for (int i = 0; i < kElements / kThreads; ++i) {
    const int idx = tid + i * kThreads, r = idx / kBK, c = idx % kBK;
    const bool ok = row0 + r < rows && k0 + c < K;
    const float* p = ok ? src + (row0 + r) * K + k0 + c : src;
    kf::tf32x3::cp_async_4(tile + r * kBK + (((c >> 2) ^ (r & 7)) << 2) + (c & 3), p, ok ? 4 : 0);
  }
}

/// Calls f(std::integral_constant<int, J>) for J = 0, 1, ...: a loop whose index is a constant.
template <int... J, typename F>
__device__ __forceinline__ void for_each_index(std::integer_sequence<int, J...>, F&& f) {
  (f(std::integral_constant<int, J>{}), ...);
}

/// kTma: the tiles come by TMA through map_x and map_w (rows 16-byte aligned); otherwise by
/// 4-byte cp.async (the maps unused).
template <bool kTma>
__global__ void __launch_bounds__(kThreads, 1)
gemm_wgmma_rs_3xtf32(const __grid_constant__ CUtensorMap map_x,
                     const __grid_constant__ CUtensorMap map_w, const float* __restrict__ x,
                     const float* __restrict__ w, const float* __restrict__ bias,
                     float* __restrict__ y, int64_t M, int64_t N, int64_t K,
                     kf::ep::Operands s) {
#if defined(KF_HAVE_WGMMA)
  constexpr auto epilogue = KF_EPILOGUE;
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned by an offset from the shared array itself (not through an integer cast),
  // so the compiler keeps shared-memory loads and stores (LDS/STS) instead of generic ones.
  float* smem = reinterpret_cast<float*>(
      smem_raw + ((1024u - (kf::tf32x3::smem_addr(smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBM;  // M fastest: blocks share W tiles
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int ktiles = static_cast<int>((K + kBK - 1) / kBK);

  auto stage = [&](int st) { return smem + st * kStageFloats; };
  // One mbarrier a stage (TMA): its phase n completes when slice st + n * STAGES has landed.
  __shared__ uint64_t landed[STAGES];
  if (kTma && tid == 0) {
#pragma unroll
    for (int st = 0; st < STAGES; ++st) kf::tma::init_barrier(&landed[st], 1);
  }
  if (kTma) __syncthreads();
  // Puts slice kt in flight into stage st: thread 0 issues both boxes (TMA), or every thread its
  // 4-byte copies and a commit group (one a call, empty or not, as the waits count them).
  auto load = [&](int st, int kt) {
    float* p = stage(st);
    const int64_t k0 = static_cast<int64_t>(kt) * kBK;
    if constexpr (kTma) {
      if (tid == 0) {
        kf::tma::arrive_expect_bytes(&landed[st], sizeof(float) * (kTileA + kTileB));
        kf::tma::load_box(p, &map_x, &landed[st], static_cast<int32_t>(k0),
                          static_cast<int32_t>(m0));
        kf::tma::load_box(p + kTileA, &map_w, &landed[st], static_cast<int32_t>(k0),
                          static_cast<int32_t>(n0));
      }
    } else {
      load_swizzled_4<kBM>(p, x, M, K, m0, k0, tid);
      load_swizzled_4<BN>(p + kTileA, w, N, K, n0, k0, tid);
      kf::tf32x3::cp_async_commit();
    }
  };
  // Waits (this thread) until slice kt, the oldest not yet waited for, has landed; for cp.async
  // the `Pending` younger groups may still fly.
  auto wait_landed = [&](int kt, auto pending) {
    if constexpr (kTma) {
      kf::tma::wait_parity(&landed[kt % STAGES], static_cast<uint32_t>(kt / STAGES) & 1u);
    } else {
      kf::tf32x3::cp_async_wait<decltype(pending)::value>();
    }
  };
  // W's slice: lo = tf32(w - trunc(w)) into the twin buffer (same layout: the swizzle stays
  // within a row); hi = trunc(w) is the raw value itself, as the tensor cores read it.
  auto split_b = [&](float* p) {
    constexpr int kVecB = kTileB / 4;
    static_assert(kVecB % kThreads == 0, "whole float4s per thread");
    float* raw_b = p + kTileA;
#pragma unroll
    for (int i = 0; i < kVecB / kThreads; ++i) {
      float* raw = raw_b + 4 * (tid + i * kThreads);
      const float4 v = *reinterpret_cast<const float4*>(raw);
      float4 l;
      l.x = __uint_as_float(round_small_tf32(v.x - __uint_as_float(truncate_tf32(v.x))));
      l.y = __uint_as_float(round_small_tf32(v.y - __uint_as_float(truncate_tf32(v.y))));
      l.z = __uint_as_float(round_small_tf32(v.z - __uint_as_float(truncate_tf32(v.z))));
      l.w = __uint_as_float(round_small_tf32(v.w - __uint_as_float(truncate_tf32(v.w))));
      *reinterpret_cast<float4*>(raw + kTileB) = l;
    }
  };
  // This thread's 16 X values of a slice: rows r0 = wg*64 + 16*warp + g and r0 + 8 (both with
  // r % 8 == g), column t of each of the 8 chunks; a row's chunk q sits at q ^ g.
  auto load_a_raw = [&](const float* p, float (&raw)[8][2]) {
    const float* row = p + (wg * 64 + warp * 16 + g) * kBK + t;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      raw[q][0] = row[(q ^ g) << 2];
      raw[q][1] = row[8 * kBK + ((q ^ g) << 2)];
    }
  };

  float acc[BN / 2], part[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] = 0.0f;
  // X's split for two slices: the one in the tensor cores and the next (indexed by parity).
  uint32_t a_hi[2][4][4], a_lo[2][4][4];
  // Loads this thread's 16 X values of the slice at p and splits them into set P: k-step k covers
  // the slice's columns 8k .. 8k + 7, chunks 2k (column t) and 2k + 1 (t + 4).
  auto load_a = [&](const float* p, auto parity) {
    constexpr int P = decltype(parity)::value;
    float raw[8][2];
    load_a_raw(p, raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float v[4] = {raw[2 * k][0], raw[2 * k][1], raw[2 * k + 1][0], raw[2 * k + 1][1]};
#pragma unroll
      for (int e = 0; e < 4; ++e) kf::tf32x3::split_truncated(v[e], a_hi[P][k][e], a_lo[P][k][e]);
    }
  };

  // Slices 0 .. STAGES-2 in flight; slice 0 split before the loop.
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < ktiles) load(st, st);
    else if (!kTma) kf::tf32x3::cp_async_commit();
  }
  if (ktiles > 0) wait_landed(0, std::integral_constant<int, STAGES - 2>{});
  __syncthreads();
  split_b(stage(0));
  kf::wgmma::fence_proxy_async();
  load_a(stage(0), std::integral_constant<int, 0>{});
  __syncthreads();

  // Slice kt = kt0 + J of a group of kGroup, its X split in set J % 2 (kGroup is even, so the
  // set is kt % 2). The flush points are compile-time, which lets ptxas see that the slice
  // accumulator is read only after wait_group 0.
  auto step = [&](int kt, auto j) {
    constexpr int J = decltype(j)::value, P = J % 2;
    constexpr bool kOpens = J % FLUSH == 0, kCloses = J % FLUSH == FLUSH - 1;
    const float* b_hi = stage(kt % STAGES) + kTileA;
    const float* b_lo = b_hi + kTileB;
    kf::wgmma::fence_operands(part);
    kf::wgmma::fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // A slice that opens a flush group starts the slice accumulator afresh (scale-d 0).
      const int scale = k > 0 || !kOpens ? 1 : 0;
      kf::wgmma::tile_rs<BN>(part, a_lo[P][k], kf::wgmma::descriptor(b_hi + 8 * k), scale);
      kf::wgmma::tile_rs<BN>(part, a_hi[P][k], kf::wgmma::descriptor(b_lo + 8 * k), 1);
      kf::wgmma::tile_rs<BN>(part, a_hi[P][k], kf::wgmma::descriptor(b_hi + 8 * k), 1);
    }
    kf::wgmma::commit();
    if constexpr (kCloses) {
      kf::wgmma::wait_group<0>();
      kf::wgmma::fence_operands(part);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
    } else {
      // Slice kt-1's products are done: its stage and X set (1 - P) are free; kt's run on.
      kf::wgmma::wait_group<1>();
    }
    // Slice kt+1 has landed (every thread's copies); every thread is past slice kt-1.
    if (kt + 1 < ktiles) wait_landed(kt + 1, std::integral_constant<int, STAGES - 3>{});
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) load(next % STAGES, next);  // into slice kt-1's stage
    else if (!kTma) kf::tf32x3::cp_async_commit();
    if (kt + 1 < ktiles) {
      float* p = stage((kt + 1) % STAGES);
      split_b(p);
      kf::wgmma::fence_proxy_async();
      load_a(p, std::integral_constant<int, 1 - P>{});
    }
    __syncthreads();  // slice kt+1's split is visible before its products are issued
  };
  constexpr int kGroup = FLUSH % 2 == 0 ? FLUSH : 2 * FLUSH;
#pragma unroll 1
  for (int kt0 = 0; kt0 < ktiles; kt0 += kGroup) {
    for_each_index(std::make_integer_sequence<int, kGroup>{}, [&](auto j) {
      if (kt0 + decltype(j)::value < ktiles) step(kt0 + decltype(j)::value, j);
    });
  }
  if (ktiles % FLUSH != 0) {  // the last group ended early: its slice accumulator is still open
    kf::wgmma::wait_group<0>();
    kf::wgmma::fence_operands(part);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
  }
  if (!kTma) kf::tf32x3::cp_async_wait<0>();

#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int64_t col = n0 + 8 * j + 2 * t;
    const float b0 = bias != nullptr && col < N ? bias[col] : 0.0f;
    const float b1 = bias != nullptr && col + 1 < N ? bias[col + 1] : 0.0f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = m0 + wg * 64 + warp * 16 + g + 8 * half;
      if (row >= M) continue;
      float* y_row = y + row * N;
      if (col < N) y_row[col] = epilogue(acc[4 * j + 2 * half] + b0, s, col);
      if (col + 1 < N) y_row[col + 1] = epilogue(acc[4 * j + 2 * half + 1] + b1, s, col + 1);
    }
  }
#else
  // Built without sm_90a's wgmma (a plain sm_90 pass): every output stays unwritten, so the
  // gate's NaN poison reports it; the family.toml target makes this branch unreachable.
  (void)x, (void)w, (void)bias, (void)y, (void)M, (void)N, (void)K, (void)s;
#endif
}

template <bool kTma>
int launch(const kf::GemmArgs& a, const CUtensorMap& map_x, const CUtensorMap& map_w,
           cudaStream_t stream) {
  auto kernel = gemm_wgmma_rs_3xtf32<kTma>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSmemBytes));
  if (err != cudaSuccess) return static_cast<int>(err);
  const dim3 grid(static_cast<unsigned>((a.m + kBM - 1) / kBM),
                  static_cast<unsigned>((a.n + BN - 1) / BN));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(map_x, map_w, a.x, a.w, a.bias, a.y, a.m, a.n,
                                                  a.k, a.operands);
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
  // TMA where the rows qualify (16-byte aligned: K % 4 == 0 and aligned bases); else 4-byte
  // copies. The maps are encoded per call (a host call of about a microsecond).
  CUtensorMap map_x{}, map_w{};
  const bool tma = a.k > 0 && kf::tma::encode_rows_f32<kBM>(&map_x, a.x, a.m, a.k) &&
                   kf::tma::encode_rows_f32<BN>(&map_w, a.w, a.n, a.k);
  return tma ? launch<true>(a, map_x, map_w, stream) : launch<false>(a, map_x, map_w, stream);
}

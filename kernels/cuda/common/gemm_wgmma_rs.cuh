// The 3xTF32 wgmma GEMM with X's split in registers (sm_90a), shared by gemm_epilogue's
// tf32x3_wgmma_rs, attention's unfused_wgmma_rs and grouped_conv's implicit_gemm_wgmma_rs:
// C[b] = X[b] W[b]^T for b < batches, X[b] [M, K] and W[b] [N, K] fp32 with K contiguous (row
// strides ldx, ldw; batch strides batch_x, batch_w, all in floats), each output element handed
// to a Store functor (the epilogue, the scale, the layout of C are the caller's), X's slices
// optionally brought by a Gather instead of read as rows (grouped_conv's implicit GEMM: the
// im2col matrix). Design and measurements:
// kernels/cuda/gemm_epilogue/tf32x3_wgmma_rs.cu.
//
// Block: 128 x BN tile of two warpgroups (kThreads 256), k-slices of 32 floats in a STAGES-deep
// ring of 128-byte-swizzled shared tiles (X raw, W raw, W lo), by TMA on mbarriers (3-D tensor
// maps: K, rows, batch) or, where a row is not 16-byte aligned, by 4-byte cp.async. grid.x the
// tile (in the grouped order below), grid.z the batch (chunks of 65535).
// The kernel's body is compiled in the sm_90a pass only (__CUDA_ARCH_FEAT_SM90_ALL: wgmma); a
// plain sm_90 build compiles but writes nothing, which the gate's NaN poison reports.
#pragma once

#include <cuda/common/tf32x3.cuh>
#include <cuda/common/tma.cuh>
#include <cuda/common/wgmma.cuh>

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace kf::wgmma_rs {

constexpr int kBM = 128, kBK = 32, kThreads = 256;
// Block order: groups of kGroupM M tiles, M fastest within a group, the group's N tiles in turn
// (the grouped order of Triton's matmul tutorial). The ~132 blocks resident at once then cover
// about 8 M tiles x 16 N tiles: both operands' slabs stay in L2 when M is large, and at L2/63's
// M = 1024 (8 M tiles) the order is plain M-fastest. Pure M-fastest streamed X from DRAM once
// per N tile (8.98 GB for L2/40, 14.9x its minimum), yet the time did not change: 5.26 ms
// M-fastest vs 5.24 grouped at L2/40's shape on an H100 (bench/kernels/compute_bound_s20.md).
// The order stays for its one grid dimension (no 65535 limit on N tiles).
constexpr int kGroupM = 8;

/// The (M tile, N tile) of linear block `pid` in the grouped order above.
__host__ __device__ inline void grouped_tile(int64_t pid, int64_t m_tiles, int64_t n_tiles,
                                             int64_t& m_tile, int64_t& n_tile) {
  const int64_t per_group = kGroupM * n_tiles;
  const int64_t first_m = pid / per_group * kGroupM;
  const int64_t rows = m_tiles - first_m < kGroupM ? m_tiles - first_m : kGroupM;
  const int64_t in_group = pid % per_group;
  m_tile = first_m + in_group % rows;
  n_tile = in_group / rows;
}

/// X's tiles as rows of memory (X[b] [m, k], row stride ldx): by TMA through the X tensor map
/// or by 4-byte copies. The default of gemm_nt's Gather: a Gather instead brings X's slices
/// itself (an implicit GEMM's im2col), by cp.async copies into the same swizzled tile. Its
/// copier does nothing: the kernel reads the rows itself.
struct RowsX {
  static constexpr bool kRows = true;
  struct Copier {
    __device__ __forceinline__ void load(float*, int64_t) {}
  };
  __device__ __forceinline__ Copier start(int64_t, int64_t, int) const { return {}; }
};

/// One batched NT GEMM: C[b] = X[b] W[b]^T (sizes in elements, strides in floats).
struct Problem {
  const float* x = nullptr;  // [batches][m rows of ldx] (k used)
  const float* w = nullptr;  // [batches][n rows of ldw] (k used)
  int64_t m = 0, n = 0, k = 0;
  int64_t ldx = 0, ldw = 0;          // row strides (>= k)
  int64_t batch_x = 0, batch_w = 0;  // batch strides (>= rows * ld)
};

/// The shared-memory layout of a point: X raw, W raw (its hi part), W lo a stage, each a
/// multiple of 1024 bytes (the 128-byte swizzle's atom).
template <int BN, int STAGES>
struct Layout {
  static_assert(BN == 64 || BN == 128, "BN: the wgmma N of the warpgroup tile, 64 or 128");
  static_assert(STAGES >= 3, "the ring holds the slice in the tensor cores, the one being "
                             "split and the one loading");
  static constexpr int kTileA = kBM * kBK, kTileB = BN * kBK;  // floats
  static constexpr int kStageFloats = kTileA + 2 * kTileB;
  static constexpr size_t kSmemBytes = sizeof(float) * STAGES * kStageFloats + 1024;  // + align
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block (sm_90: 227 KiB)");
};

/// Calls f(std::integral_constant<int, J>) for J = 0, 1, ...: a loop whose index is a constant.
template <int... J, typename F>
__device__ __forceinline__ void for_each_index(std::integer_sequence<int, J...>, F&& f) {
  (f(std::integral_constant<int, J>{}), ...);
}

/// The GEMM of batch batch0 + blockIdx.z, tile grouped_tile(blockIdx.x); every element (row,
/// col) of C inside [m, n] goes to store.row(b, row)(col, v): what a row's stores share (a
/// division into a convolution's batch and position, a row pointer) is computed once a row.
/// kTma: W's tiles (and X's, with RowsX) by TMA through map_w (map_x); otherwise by 4-byte
/// cp.async (the maps unused).
/// Gather (when not RowsX): gather.start(batch, m0, tid) returns this thread's copier of X's
/// slices, whose load(tile, k0) issues its cp.async copies of slice [m0, m0 + 128) x [k0, k0 +
/// 32) into the 128-byte-swizzled K-major tile (16-byte chunk q of row r at q ^ (r % 8)),
/// zero-filling what lies outside X; it is called for k0 = 0, 32, 64, ... in order.
template <int BN, int STAGES, int FLUSH, bool kTma, typename Store, typename Gather = RowsX>
__global__ void __launch_bounds__(kThreads, 1)
gemm_nt(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
        const Problem g, int64_t batch0, const __grid_constant__ Store store,
        const __grid_constant__ Gather gather) {  // addresses taken without a local copy
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(FLUSH >= 1, "FLUSH: slices a slice accumulator spans, 1 or more");
  using L = Layout<BN, STAGES>;
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned by an offset from the shared array itself (not through an integer cast),
  // so the compiler keeps shared-memory loads and stores (LDS/STS) instead of generic ones.
  float* smem = reinterpret_cast<float*>(
      smem_raw + ((1024u - (kf::tf32x3::smem_addr(smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int g4 = lane >> 2, t = lane & 3;
  const int64_t batch = batch0 + blockIdx.z;
  int64_t m_tile, n_tile;
  grouped_tile(blockIdx.x, (g.m + kBM - 1) / kBM, (g.n + BN - 1) / BN, m_tile, n_tile);
  const int64_t m0 = m_tile * kBM, n0 = n_tile * BN;
  const float* x = g.x + batch * g.batch_x;
  const float* w = g.w + batch * g.batch_w;
  const int ktiles = static_cast<int>((g.k + kBK - 1) / kBK);
  constexpr bool kRowsX = Gather::kRows;
  // Copies that complete through cp.async groups: all of them without TMA, X's with a Gather.
  constexpr bool kAsync = !kTma || !kRowsX;
  auto x_copier = gather.start(batch, m0, tid);  // this thread's copies of X's slices

  auto stage = [&](int st) { return smem + st * L::kStageFloats; };
  // One mbarrier a stage (TMA): its phase n completes when slice st + n * STAGES has landed.
  __shared__ uint64_t landed[STAGES];
  if (kTma && tid == 0) {
#pragma unroll
    for (int st = 0; st < STAGES; ++st) kf::tma::init_barrier(&landed[st], 1);
  }
  if (kTma) __syncthreads();
  // Puts slice kt in flight into stage st: thread 0 issues the boxes (TMA), every thread its
  // 4-byte copies (and a Gather's) and a commit group (one a call, empty or not, as the waits
  // count them).
  auto load = [&](int st, int kt) {
    float* p = stage(st);
    const int64_t k0 = static_cast<int64_t>(kt) * kBK;
    if constexpr (kTma) {
      if (tid == 0) {
        constexpr int kBoxFloats = kRowsX ? L::kTileA + L::kTileB : L::kTileB;
        kf::tma::arrive_expect_bytes(&landed[st], sizeof(float) * kBoxFloats);
        if constexpr (kRowsX) {
          kf::tma::load_box_3d(p, &map_x, &landed[st], static_cast<int32_t>(k0),
                               static_cast<int32_t>(m0), static_cast<int32_t>(batch));
        }
        kf::tma::load_box_3d(p + L::kTileA, &map_w, &landed[st], static_cast<int32_t>(k0),
                             static_cast<int32_t>(n0), static_cast<int32_t>(batch));
      }
    } else {
      if constexpr (kRowsX) {
        kf::wgmma::load_swizzled_4<kBM, kThreads>(p, x, g.m, g.k, g.ldx, m0, k0, tid);
      }
      kf::wgmma::load_swizzled_4<BN, kThreads>(p + L::kTileA, w, g.n, g.k, g.ldw, n0, k0, tid);
    }
    x_copier.load(p, k0);  // nothing with RowsX
    if constexpr (kAsync) kf::tf32x3::cp_async_commit();
  };
  // Waits (this thread) until slice kt, the oldest not yet waited for, has landed; for cp.async
  // the `Pending` younger groups may still fly.
  auto wait_landed = [&](int kt, auto pending) {
    if constexpr (kTma) {
      kf::tma::wait_parity(&landed[kt % STAGES], static_cast<uint32_t>(kt / STAGES) & 1u);
    }
    if constexpr (kAsync) kf::tf32x3::cp_async_wait<decltype(pending)::value>();
  };
  // W's slice: lo = tf32(w - trunc(w)) into the twin buffer (same layout: the swizzle stays
  // within a row); hi = trunc(w) is the raw value itself, as the tensor cores read it.
  auto split_b = [&](float* p) {
    constexpr int kVecB = L::kTileB / 4;
    static_assert(kVecB % kThreads == 0, "whole float4s per thread");
    auto lo_of = [](float v) {
      uint32_t hi, lo;
      kf::tf32x3::split_truncated(v, hi, lo);
      return __uint_as_float(lo);
    };
    float* raw_b = p + L::kTileA;
#pragma unroll
    for (int i = 0; i < kVecB / kThreads; ++i) {
      float* raw = raw_b + 4 * (tid + i * kThreads);
      const float4 v = *reinterpret_cast<const float4*>(raw);
      *reinterpret_cast<float4*>(raw + L::kTileB) =
          make_float4(lo_of(v.x), lo_of(v.y), lo_of(v.z), lo_of(v.w));
    }
  };
  // This thread's 16 X values of a slice: rows r0 = wg*64 + 16*warp + g4 and r0 + 8 (both with
  // r % 8 == g4), column t of each of the 8 chunks; a row's chunk q sits at q ^ g4.
  auto load_a_raw = [&](const float* p, float (&raw)[8][2]) {
    const float* row = p + (wg * 64 + warp * 16 + g4) * kBK + t;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      raw[q][0] = row[(q ^ g4) << 2];
      raw[q][1] = row[8 * kBK + ((q ^ g4) << 2)];
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
    else if (kAsync) kf::tf32x3::cp_async_commit();
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
    const float* b_hi = stage(kt % STAGES) + L::kTileA;
    const float* b_lo = b_hi + L::kTileB;
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
    else if (kAsync) kf::tf32x3::cp_async_commit();
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
  if (kAsync) kf::tf32x3::cp_async_wait<0>();

  // The accumulator layout of m64nN f32 (PTX ISA, wgmma register fragments): warp w of the
  // warpgroup holds rows 16w .. 16w + 15; d[4j] = (g4, 8j + 2t), d[4j + 1] = (g4, 8j + 2t + 1),
  // d[4j + 2] = (g4 + 8, 8j + 2t), d[4j + 3] = (g4 + 8, 8j + 2t + 1).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = m0 + wg * 64 + warp * 16 + g4 + 8 * half;
    if (row >= g.m) continue;
    const auto at = store.row(batch, row);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int64_t col = n0 + 8 * j + 2 * t;
      if (col < g.n) at(col, acc[4 * j + 2 * half]);
      if (col + 1 < g.n) at(col + 1, acc[4 * j + 2 * half + 1]);
    }
  }
#else
  // Built without sm_90a's wgmma (a plain sm_90 pass): every output stays unwritten, so the
  // gate's NaN poison reports it; the family.toml target makes this branch unreachable.
  (void)map_x, (void)map_w, (void)g, (void)batch0, (void)store, (void)gather;
#endif
}

/// Runs the GEMM over `batches` batches on `stream`: TMA where every row of X (with RowsX) and
/// W is 16-byte aligned (bases, ldx, ldw, batch strides multiples of 4 floats), else 4-byte
/// copies; a Gather brings X's slices itself (g.x, ldx, batch_x unused). Returns the launch's
/// cudaError_t (cudaErrorInvalidConfiguration past 2^31 - 1 tiles).
template <int BN, int STAGES, int FLUSH, typename Store, typename Gather = RowsX>
cudaError_t launch(const Problem& g, int64_t batches, const Store& store, cudaStream_t stream,
                   const Gather& gather = Gather{}) {
  using L = Layout<BN, STAGES>;
  if (g.m == 0 || g.n == 0 || batches == 0) return cudaSuccess;
  CUtensorMap map_x{}, map_w{};
  const bool tma =
      g.k > 0 &&
      (!Gather::kRows ||
       kf::tma::encode_rows_f32<kBM>(&map_x, g.x, g.m, g.k, g.ldx, batches, g.batch_x)) &&
      kf::tma::encode_rows_f32<BN>(&map_w, g.w, g.n, g.k, g.ldw, batches, g.batch_w);
  auto run = [&](auto tma_tag) {
    const auto kernel = gemm_nt<BN, STAGES, FLUSH, decltype(tma_tag)::value, Store, Gather>;
    // Once per kernel (the worker drives one device), not once per call.
    static const cudaError_t opted_in = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L::kSmemBytes));
    if (opted_in != cudaSuccess) return opted_in;
    cudaError_t err = cudaSuccess;
    constexpr int64_t kMaxGridZ = 65535;
    const int64_t tiles = (g.m + kBM - 1) / kBM * ((g.n + BN - 1) / BN);
    if (tiles >= (int64_t{1} << 31)) return cudaErrorInvalidConfiguration;
    for (int64_t batch0 = 0; batch0 < batches; batch0 += kMaxGridZ) {
      const int64_t chunk = batches - batch0 < kMaxGridZ ? batches - batch0 : kMaxGridZ;
      const dim3 grid(static_cast<unsigned>(tiles), 1, static_cast<unsigned>(chunk));
      kernel<<<grid, kThreads, L::kSmemBytes, stream>>>(map_x, map_w, g, batch0, store, gather);
      err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  };
  return tma ? run(std::true_type{}) : run(std::false_type{});
}

}  // namespace kf::wgmma_rs

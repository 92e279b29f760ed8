// Softmax and log-softmax over the last dimension, one warp per row (kernels/cuda/softmax and
// kernels/cuda/log_softmax, warp_per_row.cu, which pass their output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// ONLINE = 0: three passes over the row (max, sum of exponentials, write).
// ONLINE = 1: one pass keeps a running (max, sum) per lane, rescaling the sum when the max grows,
// lanes merge their pairs by shuffles; then the write pass. x is read twice instead of three
// times (the re-reads hit L1/L2 when the rows in flight fit there).
// Each lane takes a strided slice of the row (VEC elements per load, UNROLL loads in flight);
// ROWS_PER_BLOCK warps per block, grid-stride over rows. fp32, __expf (ex2.approx: a few ulp on
// the arguments here, which are <= 0; log-softmax's write pass needs no exponential). Vector
// loads only when every row start is VEC * sizeof(element)-byte aligned (base pointers aligned
// and cols % VEC == 0); otherwise the scalar instantiation runs.
// x and y are of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or bf16);
// loads are widened to fp32, the max, the sum and the exponentials are fp32, y is rounded once
// on the store.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than
// the compiled element type (x and y alike), -4 non-compact strides, otherwise the cudaError_t
// of the launch.
#pragma once

#include <cuda/common/online_softmax.cuh>
#include <cuda/common/softmax_rows/rows.cuh>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_ROWS_PER_BLOCK
#define KF_ROWS_PER_BLOCK 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 1
#endif
#ifndef KF_ONLINE
#define KF_ONLINE 0
#endif

// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_ROWS_PER_BLOCK >= 1 && KF_ROWS_PER_BLOCK <= 32, "ROWS_PER_BLOCK in [1, 32]");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_ONLINE == 0 || KF_ONLINE == 1, "ONLINE is 0 or 1");

namespace kf::softmax_rows::warp_per_row {

constexpr int kThreads = KF_ROWS_PER_BLOCK * 32;
// Register budget: the UNROLL*VEC floats in flight plus ~32 for addressing and sums, turned
// into a cap through __launch_bounds__ (65536 registers per SM) so ptxas does not squeeze to
// 32 registers and spill.
constexpr int kRegBudget = 2 * KF_UNROLL * KF_VEC + 32;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);

#if !KF_ONLINE
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#else
using kf::online_softmax::warp_merge;

#endif

/// y = Output of each row of x [rows, cols], V elements per access (V divides cols).
template <int V, class Output>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
kernel(const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows, int64_t cols) {
  constexpr int U = KF_UNROLL;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t nvec = cols / V;  // V divides cols on the vector path

  // The row is the same for all 32 lanes, so the loop and the shuffles are warp-uniform.
#pragma unroll 1
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * KF_ROWS_PER_BLOCK + warp; row < rows;
       row += static_cast<int64_t>(gridDim.x) * KF_ROWS_PER_BLOCK) {
    const kf_elem* xr = x + row * cols;
    kf_elem* yr = y + row * cols;
    float m = -FLT_MAX, s = 0.0f;
    int64_t i;

#if KF_ONLINE
    i = lane;
#pragma unroll 1
    for (; i + (U - 1) * 32 < nvec; i += U * 32) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
      float cm = v[0][0];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) cm = fmaxf(cm, v[u][k]);
      const float nm = fmaxf(m, cm);
      float cs = 0.0f;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) cs += __expf(v[u][k] - nm);
      s = s * __expf(m - nm) + cs;
      m = nm;
    }
#pragma unroll 1
    for (; i < nvec; i += 32) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
      float cm = v[0];
#pragma unroll
      for (int k = 1; k < V; ++k) cm = fmaxf(cm, v[k]);
      const float nm = fmaxf(m, cm);
      float cs = 0.0f;
#pragma unroll
      for (int k = 0; k < V; ++k) cs += __expf(v[k] - nm);
      s = s * __expf(m - nm) + cs;
      m = nm;
    }
    warp_merge(m, s);
#else
    {
      float mu[U];
#pragma unroll
      for (int u = 0; u < U; ++u) mu[u] = -FLT_MAX;
      i = lane;
#pragma unroll 1
      for (; i + (U - 1) * 32 < nvec; i += U * 32) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < V; ++k) mu[u] = fmaxf(mu[u], v[u][k]);
      }
#pragma unroll 1
      for (; i < nvec; i += 32) {
        float v[V];
        kf::load_vec<V>(xr + i * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) mu[0] = fmaxf(mu[0], v[k]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) m = fmaxf(m, mu[u]);
      m = warp_max(m);

      float su[U];
#pragma unroll
      for (int u = 0; u < U; ++u) su[u] = 0.0f;
      i = lane;
#pragma unroll 1
      for (; i + (U - 1) * 32 < nvec; i += U * 32) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < V; ++k) su[u] += __expf(v[u][k] - m);
      }
#pragma unroll 1
      for (; i < nvec; i += 32) {
        float v[V];
        kf::load_vec<V>(xr + i * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) su[0] += __expf(v[k] - m);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) s += su[u];
      s = warp_sum(s);
    }
#endif

    const float c = Output::row_constant(s);  // 1 / s, or an accurate log(s): once per row
    i = lane;
#pragma unroll 1
    for (; i + (U - 1) * 32 < nvec; i += U * 32) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = output<Output>(v[u][k], m, c);
        kf::store_vec<V>(yr + (i + u * 32) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += 32) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = output<Output>(v[k], m, c);
      kf::store_vec<V>(yr + i * V, v);
    }
  }
}

/// The entry point (kforge_run) of a warp_per_row variant; Output is kf::SoftmaxOutput or
/// kf::LogSoftmaxOutput. Returns 0 or an error code (see the file comment).
template <class Output>
int run(const kforge_args* args) {
  Rows call;
  if (const int error = read_rows(args, call)) return error;
  if (call.rows == 0 || call.cols == 0) return 0;
  const int64_t blocks = (call.rows + KF_ROWS_PER_BLOCK - 1) / KF_ROWS_PER_BLOCK;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff));
  if (vector_path<KF_VEC>(call))
    kernel<KF_VEC, Output><<<grid, kThreads, 0, call.stream>>>(call.x, call.y, call.rows,
                                                              call.cols);
  else
    kernel<1, Output><<<grid, kThreads, 0, call.stream>>>(call.x, call.y, call.rows, call.cols);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kf::softmax_rows::warp_per_row

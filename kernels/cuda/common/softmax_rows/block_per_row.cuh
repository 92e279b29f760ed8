// Softmax and log-softmax over the last dimension, one block per row (kernels/cuda/softmax and
// kernels/cuda/log_softmax, block_per_row.cu, which pass their output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// BLOCK_THREADS threads share a row, each a strided slice (VEC elements per load, UNROLL loads in
// flight); block reductions are warp shuffles plus one shared-memory step.
// ONLINE = 0: max pass, sum-of-exponentials pass, write pass.
// ONLINE = 1: one pass keeps a running (max, sum) per thread (the sum rescaled when the max
//             grows), merged across the block; then the write pass.
// CACHE_ROW = 1: the first pass stages the row (as fp32) in dynamic shared memory and later
//             passes read it from there (x is read from global memory exactly once). With
//             ONLINE = 0 and a softmax output (made of exp(x - m)) the sum pass also stores
//             exp(x - m) back, in fp32, so the write pass only scales; log-softmax's write pass
//             needs x itself, so nothing is stored back. CACHE_ROW = 0 re-reads x from global
//             memory (L1/L2 hits when the rows in flight fit there).
// Grid-stride over rows. fp32, __expf (a few ulp for the arguments here, which are <= 0). Vector
// loads only when every row start is VEC * sizeof(element)-byte aligned (base pointers aligned and
// cols % VEC == 0); otherwise the scalar instantiation runs. If a cached row does not fit the
// device's shared memory, the uncached kernel runs.
// x and y are of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or bf16);
// loads are widened to fp32, the max, the sum and the exponentials are fp32, y is rounded once
// on the store.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than
// the compiled element type (x and y alike), -4 non-compact strides, otherwise a cudaError_t.
#pragma once

#include <cuda/common/online_softmax.cuh>
#include <cuda/common/softmax_rows/rows.cuh>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 256
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 1
#endif
#ifndef KF_CACHE_ROW
#define KF_CACHE_ROW 0
#endif
#ifndef KF_ONLINE
#define KF_ONLINE 0
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_CACHE_ROW == 0 || KF_CACHE_ROW == 1, "CACHE_ROW is 0 or 1");
static_assert(KF_ONLINE == 0 || KF_ONLINE == 1, "ONLINE is 0 or 1");

namespace kf::softmax_rows::block_per_row {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;
// Register budget: the UNROLL*VEC floats in flight plus ~32 for addressing and sums, turned
// into a cap through __launch_bounds__ (65536 registers per SM) so ptxas does not squeeze to
// 32 registers and spill.
constexpr int kRegBudget = 2 * KF_UNROLL * KF_VEC + 32;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);

template <int V>
__device__ __forceinline__ void load_shared(const float* p, float (&v)[V]) {
  if constexpr (V % 4 == 0) {  // V = 8 (halves): two 16-byte accesses
#pragma unroll
    for (int j = 0; j < V; j += 4) {
      const float4 t = *reinterpret_cast<const float4*>(p + j);
      v[j] = t.x; v[j + 1] = t.y; v[j + 2] = t.z; v[j + 3] = t.w;
    }
  } else if constexpr (V == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x; v[1] = t.y;
  } else {
    static_assert(V == 1, "V is 1, 2 or a multiple of 4");
    v[0] = p[0];
  }
}

template <int V>
__device__ __forceinline__ void store_shared(float* p, const float (&v)[V]) {
  if constexpr (V % 4 == 0) {  // V = 8 (halves): two 16-byte accesses
#pragma unroll
    for (int j = 0; j < V; j += 4) {
      *reinterpret_cast<float4*>(p + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    }
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
    static_assert(V == 1, "V is 1, 2 or a multiple of 4");
    p[0] = v[0];
  }
}

// Reads chunk i (VEC elements, as fp32) of the row: from the fp32 staging buffer when it holds
// the row.
template <int V, bool FROM_CACHE>
__device__ __forceinline__ void load_row(const kf_elem* xr, const float* cache, int64_t i,
                                         float (&v)[V]) {
  if constexpr (FROM_CACHE)
    load_shared<V>(cache + i * V, v);
  else
    kf::load_vec<V>(xr + i * V, v);
}

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

// Block-wide sum / max; every thread gets the result. red[] holds kWarps partials and the
// result in red[32]. Safe to call again right away: a later call writes red[0..kWarps) only,
// and red[32] only after a barrier that every reader of the previous result has passed.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kWarps ? red[lane] : 0.0f;
    t = warp_sum(t);
    if (lane == 0) red[32] = t;
  }
  __syncthreads();
  return red[32];
}

__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kWarps ? red[lane] : -FLT_MAX;
    t = warp_max(t);
    if (lane == 0) red[32] = t;
  }
  __syncthreads();
  return red[32];
}
#else
using kf::online_softmax::warp_merge;

// Block-wide merge; same buffer discipline as a block sum (results in red_m[32], red_s[32]).
__device__ __forceinline__ void block_merge(float& m, float& s, float* red_m, float* red_s) {
  warp_merge(m, s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    red_m[warp] = m;
    red_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    float tm = lane < kWarps ? red_m[lane] : -FLT_MAX;
    float ts = lane < kWarps ? red_s[lane] : 0.0f;
    warp_merge(tm, ts);
    if (lane == 0) {
      red_m[32] = tm;
      red_s[32] = ts;
    }
  }
  __syncthreads();
  m = red_m[32];
  s = red_s[32];
}
#endif

// y of one element in the write pass: from the staged exp(x - m) when the buffer holds it, else
// from x (output() in rows.cuh).
template <class Output, bool HOLDS_EXP>
__device__ __forceinline__ float write_output(float v, float m, float c) {
  if constexpr (HOLDS_EXP) {
    return Output::from_exp(v, c);
  } else {
    return output<Output>(v, m, c);
  }
}

// y = Output of each row of x [rows, cols], V elements per access (V divides cols).
// CACHE: the row is staged in dynamic shared memory (cols floats). Thread t only ever touches
// the chunks t, t + kThreads, ... of the row in every pass, so no barrier guards the staging
// buffer: each thread reads back exactly what it wrote itself.
template <int V, bool CACHE, class Output>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
kernel(const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows, int64_t cols) {
  constexpr int U = KF_UNROLL;
  extern __shared__ float4 row_cache_raw[];  // float4: 16-byte aligned
  float* row_cache = reinterpret_cast<float*>(row_cache_raw);
  __shared__ float red_m[33];
  __shared__ float red_s[33];
  const int64_t nvec = cols / V;  // V divides cols on the vector path

#pragma unroll 1
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const kf_elem* xr = x + row * cols;
    kf_elem* yr = y + row * cols;
    float m = -FLT_MAX, s = 0.0f;
    int64_t i;

#if KF_ONLINE
    // Pass 1: running (max, sum); stage the row if caching.
    i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * kThreads) * V, v[u]);
      float cm = v[0][0];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (CACHE) store_shared<V>(row_cache + (i + u * kThreads) * V, v[u]);
#pragma unroll
        for (int k = 0; k < V; ++k) cm = fmaxf(cm, v[u][k]);
      }
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
    for (; i < nvec; i += kThreads) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
      if constexpr (CACHE) store_shared<V>(row_cache + i * V, v);
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
    block_merge(m, s, red_m, red_s);
#else
    // Pass 1: maximum; stage the row if caching.
    {
      float mu[U];
#pragma unroll
      for (int u = 0; u < U; ++u) mu[u] = -FLT_MAX;
      i = threadIdx.x;
#pragma unroll 1
      for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * kThreads) * V, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if constexpr (CACHE) store_shared<V>(row_cache + (i + u * kThreads) * V, v[u]);
#pragma unroll
          for (int k = 0; k < V; ++k) mu[u] = fmaxf(mu[u], v[u][k]);
        }
      }
#pragma unroll 1
      for (; i < nvec; i += kThreads) {
        float v[V];
        kf::load_vec<V>(xr + i * V, v);
        if constexpr (CACHE) store_shared<V>(row_cache + i * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) mu[0] = fmaxf(mu[0], v[k]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) m = fmaxf(m, mu[u]);
      m = block_max(m, red_m);
    }
    // Pass 2: sum of exponentials; with the row cached and an output made of exp(x - m), keep
    // exp(x - m) in place of x.
    {
      float su[U];
#pragma unroll
      for (int u = 0; u < U; ++u) su[u] = 0.0f;
      i = threadIdx.x;
#pragma unroll 1
      for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_row<V, CACHE>(xr, row_cache, i + u * kThreads, v[u]);
        if constexpr (Output::kFromExp) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              v[u][k] = __expf(v[u][k] - m);
              su[u] += v[u][k];
            }
            if constexpr (CACHE) store_shared<V>(row_cache + (i + u * kThreads) * V, v[u]);
          }
        } else {
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int k = 0; k < V; ++k) su[u] += __expf(v[u][k] - m);
        }
      }
#pragma unroll 1
      for (; i < nvec; i += kThreads) {
        float v[V];
        load_row<V, CACHE>(xr, row_cache, i, v);
        if constexpr (Output::kFromExp) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            v[k] = __expf(v[k] - m);
            su[0] += v[k];
          }
          if constexpr (CACHE) store_shared<V>(row_cache + i * V, v);
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k) su[0] += __expf(v[k] - m);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) s += su[u];
      s = block_sum(s, red_s);
    }
#endif

    // Write pass. Cached with ONLINE = 0 and an output made of exp(x - m): the buffer already
    // holds exp(x - m).
    constexpr bool kHoldsExp = CACHE && !KF_ONLINE && Output::kFromExp;
    const float c = Output::row_constant(s);  // 1 / s, or an accurate log(s): once per row
    i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_row<V, CACHE>(xr, row_cache, i + u * kThreads, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = write_output<Output, kHoldsExp>(v[u][k], m, c);
        kf::store_vec<V>(yr + (i + u * kThreads) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float v[V];
      load_row<V, CACHE>(xr, row_cache, i, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = write_output<Output, kHoldsExp>(v[k], m, c);
      kf::store_vec<V>(yr + i * V, v);
    }
  }
}

template <int V, class Output>
int launch(const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 0x7fffffff));
  if constexpr (KF_CACHE_ROW != 0) {
    const size_t smem = static_cast<size_t>((cols + 3) / 4) * 16;
    int device = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return static_cast<int>(err);
    // Leave room for the static reduction buffers.
    if (smem + 1024 <= static_cast<size_t>(optin)) {
      if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(kernel<V, true, Output>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem));
        if (err != cudaSuccess) return static_cast<int>(err);
      }
      kernel<V, true, Output><<<grid, kThreads, smem, stream>>>(x, y, rows, cols);
      return static_cast<int>(cudaGetLastError());
    }
  }
  kernel<V, false, Output><<<grid, kThreads, 0, stream>>>(x, y, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

/// The entry point (kforge_run) of a block_per_row variant; Output is kf::SoftmaxOutput or
/// kf::LogSoftmaxOutput. Returns 0 or an error code (see the file comment).
template <class Output>
int run(const kforge_args* args) {
  Rows call;
  if (const int error = read_rows(args, call)) return error;
  if (call.rows == 0 || call.cols == 0) return 0;
  if (vector_path<KF_VEC>(call))
    return launch<KF_VEC, Output>(call.x, call.y, call.rows, call.cols, call.stream);
  return launch<1, Output>(call.x, call.y, call.rows, call.cols, call.stream);
}

}  // namespace kf::softmax_rows::block_per_row

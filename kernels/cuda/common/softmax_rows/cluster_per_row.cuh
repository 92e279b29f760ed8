// Softmax and log-softmax over the last dimension, one thread-block cluster per row (Hopper,
// sm_90; kernels/cuda/softmax and kernels/cuda/log_softmax, cluster_per_row.cu, which pass their
// output functor to run<>):
//   m = max_c x[r, :],  s = sum_c exp(x[r, c] - m),  y[r, c] = Output(x[r, c], m, s)
// (kernels/common/softmax_output.h: exp(x - m) / s or (x - m) - log(s)).
// For very long rows (KernelBench 23_Softmax and 24_LogSoftmax: 393,216 floats, 1.5 MiB per
// row) that no single block can hold on chip. The row is split into CLUSTER contiguous chunks,
// one per block; each block reads its chunk from global memory once into shared memory while
// keeping an online (max, rescaled sum) per thread (Milakov & Gimelshein 2018, "Online normalizer
// calculation for softmax"), merges it across the block, publishes it in shared memory, and
// after a cluster barrier reads every block's (max, sum) through distributed shared memory (CUDA
// Programming Guide, "Distributed Shared Memory") to get the row's. The write pass reads the
// chunk back from shared memory: x is read from DRAM exactly once and y written once, the
// minimum traffic. The barrier that protects a published partial from being overwritten is
// split (arrive after the remote reads, wait after the next row's loads), so only one cluster
// barrier per row stalls.
//   Bytes per call: rows * cols * 2 * sizeof(element). FLOPs ~5 per element: memory-bound.
// x and y are of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or bf16);
// loads are widened to fp32 and the chunk is cached as fp32 (so a chunk holds as many elements
// whatever the type), the statistics are fp32, y is rounded once on the store.
// When a chunk does not fit the opt-in shared memory (cols > CLUSTER * ~56K floats), the write
// pass re-reads x from global memory instead (1.5x the minimum traffic). CLUSTER > 8 needs the
// non-portable cluster size attribute (up to 16 on H100/H200). UNROLL loads per thread are in
// flight before any is used. Vector loads when cols % VEC == 0 and both pointers are
// VEC * sizeof(element)-byte aligned; otherwise the scalar instantiation runs.
// Error codes of run<>: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than
// the compiled element type (x and y alike), -4 non-compact strides, otherwise a cudaError_t.
#pragma once

#include <cuda/common/online_softmax.cuh>
#include <cuda/common/softmax_rows/rows.cuh>

#include <cooperative_groups.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#ifndef KF_CLUSTER
#define KF_CLUSTER 8
#endif
#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 512
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 4
#endif

static_assert(KF_CLUSTER == 2 || KF_CLUSTER == 4 || KF_CLUSTER == 8 || KF_CLUSTER == 16,
              "CLUSTER is 2, 4, 8 or 16");
static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 64 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [64, 1024]");
// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace kf::softmax_rows::cluster_per_row {

namespace cg = cooperative_groups;

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;

// The fp32 chunk cache in shared memory: plain loads and stores.
template <int V>
__device__ __forceinline__ void load_plain(const float* p, float (&v)[V]) {
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
    v[0] = *p;
  }
}

template <int V>
__device__ __forceinline__ void store(float* p, const float (&v)[V]) {
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

/// Element `i` (in vectors) of the chunk as fp32: from shared memory when cached, else from global.
template <int V, bool CACHE>
__device__ __forceinline__ void load_row(const kf_elem* xr, const float* cache, int64_t i,
                                         float (&v)[V]) {
  if constexpr (CACHE) {
    load_plain<V>(cache + i * V, v);
  } else {
    kf::load_vec<V>(xr + i * V, v);
  }
}

using kf::online_softmax::accumulate;
using kf::online_softmax::merge;
using kf::online_softmax::warp_merge;

/// The block's merged state in every thread.
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

/// `chunk` (a multiple of V) elements of each row per block; block rank k of a cluster owns
/// [k * chunk, min(cols, (k + 1) * chunk)).
template <int V, bool CACHE, class Output>
__global__ void __launch_bounds__(kThreads)
kernel(const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t rows, int64_t cols,
       int64_t chunk) {
  constexpr int U = KF_UNROLL;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  extern __shared__ float4 cache_raw[];  // float4: 16-byte aligned
  float* cache = reinterpret_cast<float*>(cache_raw);
  __shared__ float red_m[33];
  __shared__ float red_s[33];
  __shared__ float partial[2];  // this block's (max, sum), read by the cluster's other blocks
  __shared__ float total[2];

  const int64_t begin = static_cast<int64_t>(rank) * chunk;
  const int64_t end = cols < begin + chunk ? cols : begin + chunk;
  const int64_t nvec = end > begin ? (end - begin) / V : 0;  // V divides chunk and cols
  const int64_t clusters = gridDim.x / blocks;
  bool pending = false;  // an arrival on the cluster barrier not yet waited for

#pragma unroll 1
  for (int64_t row = blockIdx.x / blocks; row < rows; row += clusters) {
    const kf_elem* xr = x + row * cols + begin;
    kf_elem* yr = y + row * cols + begin;
    float m = -FLT_MAX, s = 0.0f;
    // UNROLL loads of VEC elements in flight per thread before any is used: the bytes in flight
    // per SM must cover DRAM latency (about 32 KiB per SM at 4.25 TB/s).
    int64_t i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * kThreads) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (CACHE) store<V>(cache + (i + u * kThreads) * V, v[u]);
        accumulate<V>(v[u], m, s);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
      if constexpr (CACHE) store<V>(cache + i * V, v);
      accumulate<V>(v, m, s);
    }
    block_merge(m, s, red_m, red_s);
    // The other blocks have read this block's previous partial (the arrival after their reads
    // of the previous row): only now may it be overwritten. Waiting here, after the load phase,
    // hides that barrier behind the loads.
    if (pending) cluster.barrier_wait();
    if (threadIdx.x == 0) {
      partial[0] = m;
      partial[1] = s;
    }
    cluster.sync();  // every block's partial is published
    if (threadIdx.x < 32) {
      float tm = -FLT_MAX, ts = 0.0f;
      if (threadIdx.x < blocks) {
        const float* remote = cluster.map_shared_rank(partial, threadIdx.x);
        tm = remote[0];
        ts = remote[1];
      }
      warp_merge(tm, ts);
      if (threadIdx.x == 0) {
        total[0] = tm;
        total[1] = Output::row_constant(ts);  // 1 / s, or an accurate log(s): once per row
      }
    }
    cluster.barrier_arrive();  // this block is done reading the others' partials
    pending = true;
    __syncthreads();  // publishes `total` within the block
    const float row_max = total[0], c = total[1];
    i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_row<V, CACHE>(xr, cache, i + u * kThreads, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = output<Output>(v[u][k], row_max, c);
        kf::store_vec<V>(yr + (i + u * kThreads) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float v[V];
      load_row<V, CACHE>(xr, cache, i, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = output<Output>(v[k], row_max, c);
      kf::store_vec<V>(yr + i * V, v);
    }
  }
  // A block's shared memory must outlive every remote read of it: no block exits before all
  // have read the last partials.
  if (pending) cluster.barrier_wait();
}

template <int V, bool CACHE, class Output>
cudaError_t launch_with(const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols, int64_t chunk,
                        size_t smem, cudaStream_t stream) {
  auto instance = kernel<V, CACHE, Output>;
  cudaError_t err = cudaSuccess;
  if (KF_CLUSTER > 8) {
    err = cudaFuncSetAttribute(instance, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
  }
  if (smem > 48 * 1024) {
    err = cudaFuncSetAttribute(instance, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  cudaLaunchConfig_t config = {};
  // One cluster per row, at most 2^20 clusters (grid-stride over the rest).
  config.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20) * KF_CLUSTER));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = KF_CLUSTER;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, instance, x, y, rows, cols, chunk);
}

template <int V, class Output>
int launch(const kf_elem* x, kf_elem* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  int64_t chunk = (cols + KF_CLUSTER - 1) / KF_CLUSTER;
  chunk = (chunk + V - 1) / V * V;
  const size_t smem = static_cast<size_t>(chunk) * sizeof(float);
  int device = 0, optin = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  // Leave room for the static buffers (~300 bytes).
  if (smem + 1024 <= static_cast<size_t>(optin)) {
    return static_cast<int>(launch_with<V, true, Output>(x, y, rows, cols, chunk, smem, stream));
  }
  return static_cast<int>(launch_with<V, false, Output>(x, y, rows, cols, chunk, 0, stream));
}

/// The entry point (kforge_run) of a cluster_per_row variant; Output is kf::SoftmaxOutput or
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

}  // namespace kf::softmax_rows::cluster_per_row

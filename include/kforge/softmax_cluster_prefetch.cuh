// Row softmax / log-softmax over the last dimension with persistent thread-block clusters that
// prefetch the next row (Hopper, sm_90), shared by kernels/cuda/softmax/cluster_prefetch.cu and
// kernels/cuda/log_softmax/cluster_prefetch.cu, which differ only in the output functor:
//   softmax      y = exp(x - m) / s
//   log-softmax  y = x - m - log(s),       m = max_c x[r, :], s = sum_c exp(x[r, c] - m).
//
// For very long rows (KernelBench 23/24: 4096 x 393216 fp32, 1.5 MiB per row). The grid holds as
// many clusters of CLUSTER blocks as can be resident at once (cudaOccupancyMaxActiveClusters)
// and each cluster walks the rows r = cluster, cluster + clusters, ... Block k of a cluster owns
// columns [k * chunk, (k + 1) * chunk) of every row, held in one of two shared-memory buffers:
// while the block reduces and writes row r from one buffer, cp.async (16 B per request, issued
// by every thread, <cuda_pipeline.h>) is already filling the other with its chunk of the
// cluster's next row. So an SM always has loads in flight, and x is read from DRAM once and y
// written once (the minimum traffic). Per row: each block folds its chunk into an online
// (max, rescaled sum) (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"),
// publishes it in one of two shared slots, one cluster barrier, then every block reads all
// partials through distributed shared memory (CUDA Programming Guide, "Distributed Shared
// Memory"). Two slots make one barrier per row enough: a slot is rewritten two rows later, after
// the next barrier, which no block passes before finishing its reads.
//
// The cluster_per_row variant (one non-persistent cluster per row, one buffer) alternates a read
// phase and a write phase on each SM; this one overlaps the next row's reads with the current
// row's writes. Needs cols % 4 == 0, 16-byte aligned x and y, and two chunks (2 * cols / CLUSTER
// floats) within the opt-in shared memory; otherwise the same clusters read x from global memory
// twice (the fallback for odd sizes: correct, 1.5x the minimum traffic).
// Bytes per call: rows * cols * 8 (fp32 in and out). FLOPs ~5 per element: memory-bound.
#pragma once

#include <kforge/kernel.h>

#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#ifndef KF_CLUSTER
#define KF_CLUSTER 16
#endif
#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 512
#endif

static_assert(KF_CLUSTER == 2 || KF_CLUSTER == 4 || KF_CLUSTER == 8 || KF_CLUSTER == 16,
              "CLUSTER is 2, 4, 8 or 16");
static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 64 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [64, 1024]");

namespace kf_softmax_prefetch {

namespace cg = cooperative_groups;

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;

/// Merges two online-softmax states (max, sum of exp(x - max)).
__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  // -FLT_MAX (empty state) against -FLT_MAX gives exp(0) * 0: stays empty.
  s = s * __expf(m - nm) + os * __expf(om - nm);
  m = nm;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  }
}

/// The block's merged state in every thread (red_m, red_s: 33 floats of shared memory each).
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

/// Folds one value into a thread's online state (the global-memory fallback).
__device__ __forceinline__ void accumulate(float v, float& m, float& s) {
  if (v > m) {
    s = s * __expf(m - v) + 1.0f;
    m = v;
  } else {
    s += __expf(v - m);
  }
}

/// The block's maximum in every thread (red: 33 floats of shared memory).
__device__ __forceinline__ float block_max(float m, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kWarps ? red[lane] : -FLT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
    if (lane == 0) red[32] = t;
  }
  __syncthreads();
  return red[32];
}

/// PREFETCH: chunks staged in shared memory by cp.async (chunk % 4 == 0, 16-byte aligned rows);
/// otherwise both passes read global memory. Output(v, max, sum) gives y.
template <bool PREFETCH, typename Output>
__global__ void __launch_bounds__(kThreads, 1)
row_softmax(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols,
            int64_t chunk) {
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  extern __shared__ float4 buffers[];  // 2 * chunk / 4 float4 when PREFETCH
  __shared__ float red_m[33];
  __shared__ float red_s[33];
  __shared__ float partial[2][2];  // [row parity][max, sum], read by the other blocks
  __shared__ float total[2];       // the row's max and sum

  const int64_t begin = static_cast<int64_t>(rank) * chunk;
  const int64_t end = cols < begin + chunk ? cols : begin + chunk;
  const int64_t count = end > begin ? end - begin : 0;  // this block's columns
  const int64_t count4 = count / 4;                      // whole float4s (PREFETCH: all)
  const int64_t clusters = gridDim.x / KF_CLUSTER;
  const int tid = static_cast<int>(threadIdx.x);

  auto prefetch = [&](int64_t row, float4* dst) {
    const float4* src = reinterpret_cast<const float4*>(x + row * cols + begin);
    for (int64_t i = tid; i < count4; i += kThreads) __pipeline_memcpy_async(dst + i, src + i, 16);
    __pipeline_commit();
  };

  int64_t row = blockIdx.x / KF_CLUSTER;
  if (PREFETCH && row < rows) prefetch(row, buffers);
#pragma unroll 1
  for (int parity = 0; row < rows; row += clusters, parity ^= 1) {
    const float4* cur = buffers + (parity ? chunk / 4 : 0);
    if constexpr (PREFETCH) {
      const int64_t next = row + clusters;
      if (next < rows) {
        prefetch(next, buffers + (parity ? 0 : chunk / 4));
        __pipeline_wait_prior(1);  // this row's copies have landed, the next row's may not
      } else {
        __pipeline_wait_prior(0);
      }
      __syncthreads();  // every thread's copies of this row are visible to the block
    }
    const float* xr = x + row * cols + begin;
    float* yr = y + row * cols + begin;
    float m = -FLT_MAX, s = 0.0f;
    if constexpr (PREFETCH) {
      // Two passes over the chunk in shared memory (cheap next to DRAM) instead of the online
      // update's serial max/rescale chain: the block's max, then sum exp(x - max) in four
      // independent accumulators; (block max, block sum) is the partial the cluster merges.
      float m4 = -FLT_MAX;
#pragma unroll 4
      for (int64_t i = tid; i < count4; i += kThreads) {
        const float4 v = cur[i];
        m4 = fmaxf(m4, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
      }
      m = block_max(m4, red_m);
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll 4
      for (int64_t i = tid; i < count4; i += kThreads) {
        const float4 v = cur[i];
        s0 += __expf(v.x - m);
        s1 += __expf(v.y - m);
        s2 += __expf(v.z - m);
        s3 += __expf(v.w - m);
      }
      s = (s0 + s1) + (s2 + s3);
    } else {
#pragma unroll 4
      for (int64_t i = tid; i < count; i += kThreads) accumulate(__ldg(xr + i), m, s);
    }
    block_merge(m, s, red_m, red_s);
    if (tid == 0) {
      partial[parity][0] = m;
      partial[parity][1] = s;
    }
    cluster.sync();  // every block's partial of this row is published
    if (tid < 32) {
      float tm = -FLT_MAX, ts = 0.0f;
      if (tid < KF_CLUSTER) {
        const float* remote = cluster.map_shared_rank(&partial[parity][0], tid);
        tm = remote[0];
        ts = remote[1];
      }
      warp_merge(tm, ts);
      if (tid == 0) {
        total[0] = tm;
        total[1] = ts;
      }
    }
    __syncthreads();  // publishes `total` within the block
    const Output out(total[0], total[1]);
    if constexpr (PREFETCH) {
      float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll 4
      for (int64_t i = tid; i < count4; i += kThreads) {
        const float4 v = cur[i];
        __stcs(y4 + i, make_float4(out(v.x), out(v.y), out(v.z), out(v.w)));
      }
    } else {
#pragma unroll 4
      for (int64_t i = tid; i < count; i += kThreads) yr[i] = out(__ldg(xr + i));
    }
    // Every thread is done with `cur` and `total` before the next iteration refills them.
    __syncthreads();
  }
  // A block's shared memory must outlive the other blocks' reads of its last partial.
  cluster.sync();
}

/// Largest number of co-resident clusters for `kernel` with `smem` dynamic bytes, or an error.
template <typename Kernel>
cudaError_t resident_clusters(Kernel kernel, size_t smem, int* clusters) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(KF_CLUSTER);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = KF_CLUSTER;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
}

template <bool PREFETCH, typename Output>
cudaError_t launch_with(const float* x, float* y, int64_t rows, int64_t cols, int64_t chunk,
                        size_t smem, cudaStream_t stream) {
  auto kernel = row_softmax<PREFETCH, Output>;
  cudaError_t err = cudaSuccess;
  if (KF_CLUSTER > 8) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
  }
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int clusters = 0;
  err = resident_clusters(kernel, smem, &clusters);
  if (err != cudaSuccess) return err;
  if (clusters < 1) return cudaErrorInvalidConfiguration;  // a cluster cannot be resident
  const int64_t grid = (rows < clusters ? rows : clusters) * int64_t{KF_CLUSTER};
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(grid));
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
  return cudaLaunchKernelEx(&config, kernel, x, y, rows, cols, chunk);
}

inline bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

inline bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

/// The entry point's body: inputs x [rows, cols] fp32, output y [rows, cols] fp32.
/// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype, -4 non-compact
/// strides, otherwise a cudaError_t.
template <typename Output>
int run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& xt = args->inputs[0];
  const DLTensor& yt = args->outputs[0];
  if (xt.ndim != 2 || yt.ndim != 2) return -2;
  const int64_t rows = xt.shape[0], cols = xt.shape[1];
  if (yt.shape[0] != rows || yt.shape[1] != cols) return -2;
  if (!is_f32(xt) || !is_f32(yt)) return -3;
  if (!is_compact(xt) || !is_compact(yt)) return -4;
  if (rows == 0 || cols == 0) return 0;
  const float* x = reinterpret_cast<const float*>(static_cast<const char*>(xt.data) + xt.byte_offset);
  float* y = reinterpret_cast<float*>(static_cast<char*>(yt.data) + yt.byte_offset);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);

  int64_t chunk = (cols + KF_CLUSTER - 1) / KF_CLUSTER;
  chunk = (chunk + 3) / 4 * 4;  // whole float4s, so every block's rows stay 16-byte aligned
  const size_t smem = 2 * static_cast<size_t>(chunk) * sizeof(float);
  int device = 0, optin = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  // Leave room for the static buffers (~300 bytes).
  if (cols % 4 == 0 && aligned && smem + 1024 <= static_cast<size_t>(optin)) {
    return static_cast<int>(launch_with<true, Output>(x, y, rows, cols, chunk, smem, stream));
  }
  return static_cast<int>(launch_with<false, Output>(x, y, rows, cols, chunk, 0, stream));
}

}  // namespace kf_softmax_prefetch

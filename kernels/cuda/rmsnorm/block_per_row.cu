// RMSNorm, one block per row: y[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * w[c].
// BLOCK_THREADS threads share a row: each sums the squares of a strided slice (VEC elements per
// load, UNROLL loads in flight), warp shuffles then one shared-memory step give the block's sum,
// then the row is normalized. CACHE_ROW = 1 keeps the row (as fp32) in dynamic shared memory
// between the two passes (x is read from global memory once); CACHE_ROW = 0 re-reads it (from
// L1/L2). Grid-stride over rows.
// x, w and y are all of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or bf16;
// w has the activations' type, as RMSNorm weights do in LLM inference); loads are widened to
// fp32, the sum and the scaling are fp32, y is rounded once on the store.
// Vector loads only when every row start is VEC * sizeof(element)-byte aligned (base pointers
// aligned and cols % VEC == 0); otherwise the scalar instantiation runs.
// If a cached row does not fit the device's shared memory, the uncached kernel runs.
#include <cuda/common/elem.cuh>

#include <algorithm>
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

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_CACHE_ROW == 0 || KF_CACHE_ROW == 1, "CACHE_ROW is 0 or 1");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;
// Register budget: the UNROLL*VEC floats of x and w in flight plus ~32 for addressing and
// sums. __launch_bounds__' minimum-blocks argument turns it into a cap (65536 registers per SM),
// so ptxas neither spills nor, left alone, squeezes to 32 registers and spills for occupancy.
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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the result. red[] holds kWarps partials and the total
// in red[32]. Safe to call again right away: the next call writes red[0..kWarps) only, and
// red[32] only after a barrier that every reader of the previous total has passed.
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

// CACHE: the row is staged in dynamic shared memory (cols floats). Thread t only ever touches
// the chunks t, t + kThreads, ... of the row in both passes, so no barrier guards the staging
// buffer: each thread reads back exactly what it wrote itself.
template <int V, bool CACHE>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
rmsnorm_block_per_row(const kf_elem* __restrict__ x, const kf_elem* __restrict__ w,
                      kf_elem* __restrict__ y, int64_t rows, int64_t cols, float eps) {
  constexpr int U = KF_UNROLL;
  extern __shared__ float4 row_cache_raw[];  // fp32 whatever KF_DTYPE is; float4: 16-byte aligned
  float* row_cache = reinterpret_cast<float*>(row_cache_raw);
  __shared__ float red[33];
  const int64_t nvec = cols / V;  // V divides cols on the vector path
  const float inv_cols = 1.0f / static_cast<float>(cols);

#pragma unroll 1
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const kf_elem* xr = x + row * cols;
    kf_elem* yr = y + row * cols;

    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;
    int64_t i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * kThreads) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (CACHE) store_shared<V>(row_cache + (i + u * kThreads) * V, v[u]);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] = fmaf(v[u][k], v[u][k], acc[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
      if constexpr (CACHE) store_shared<V>(row_cache + i * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] = fmaf(v[k], v[k], acc[0]);
    }
    float ss = acc[0];
#pragma unroll
    for (int u = 1; u < U; ++u) ss += acc[u];
    ss = block_sum(ss, red);
    const float inv = rsqrtf(ss * inv_cols + eps);

    i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U][V], g[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (CACHE)
          load_shared<V>(row_cache + (i + u * kThreads) * V, v[u]);
        else
          kf::load_vec<V>(xr + (i + u * kThreads) * V, v[u]);
        kf::load_vec<V>(w + (i + u * kThreads) * V, g[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = v[u][k] * inv * g[u][k];
        kf::store_vec<V>(yr + (i + u * kThreads) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float v[V], g[V];
      if constexpr (CACHE)
        load_shared<V>(row_cache + i * V, v);
      else
        kf::load_vec<V>(xr + i * V, v);
      kf::load_vec<V>(w + i * V, g);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = v[k] * inv * g[k];
      kf::store_vec<V>(yr + i * V, v);
    }
  }
}

template <int V>
int launch(const kf_elem* x, const kf_elem* w, kf_elem* y, int64_t rows, int64_t cols, float eps,
           cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 0x7fffffff));
  if constexpr (KF_CACHE_ROW != 0) {
    const size_t smem = static_cast<size_t>((cols + 3) / 4) * 16;
    int device = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return static_cast<int>(err);
    // Leave room for the static reduction buffer.
    if (smem + 1024 <= static_cast<size_t>(optin)) {
      if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(rmsnorm_block_per_row<V, true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem));
        if (err != cudaSuccess) return static_cast<int>(err);
      }
      rmsnorm_block_per_row<V, true><<<grid, kThreads, smem, stream>>>(x, w, y, rows, cols, eps);
      return static_cast<int>(cudaGetLastError());
    }
  }
  rmsnorm_block_per_row<V, false><<<grid, kThreads, 0, stream>>>(x, w, y, rows, cols, eps);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 a dtype other than the
// compiled element type (x, w and y alike), -4 non-compact strides, otherwise a cudaError_t.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_elem(x) || !kf::is_elem(w) || !kf::is_elem(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(w) || !kf::is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const kf_elem* xp = kf::data_of<const kf_elem>(x);
  const kf_elem* wp = kf::data_of<const kf_elem>(w);
  kf_elem* yp = kf::data_of<kf_elem>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * kf::kElemBytes;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && kf::aligned(xp, bytes) &&
                   kf::aligned(wp, bytes) && kf::aligned(yp, bytes);
  if (vec) return launch<KF_VEC>(xp, wp, yp, rows, cols, eps, stream);
  return launch<1>(xp, wp, yp, rows, cols, eps, stream);
}

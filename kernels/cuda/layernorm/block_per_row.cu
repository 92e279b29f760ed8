// LayerNorm over the last dimension, one block per row (rows of a few thousand to a few
// hundred thousand elements, e.g. the LLM shape 8192 x 4096):
//   y[r, c] = (x[r, c] - mean_r) * rsqrt(var_r + eps) * w[c] + b[c],  var_r biased (1/cols).
// BLOCK_THREADS threads share a row (VEC elements per load, UNROLL loads in flight); each keeps
// running statistics of its slice (WELFORD = 1: count, mean and sum of squared deviations,
// merged with Chan et al.'s formula, stable for rows with a large mean; WELFORD = 0: sum and sum
// of squares, var = E[x^2] - mean^2, one fewer dependent operation but cancellation when
// |mean| >> std), merged by warp shuffles and one shared-memory step, then the write pass.
// CACHE_ROW = 1 stages the row (as fp32) in dynamic shared memory during the statistics pass, so
// x is read from global memory once (rows up to ~56K elements on an H200; longer rows fall back
// to re-reading). Grid-stride over rows. Vector loads only when cols % VEC == 0 and every
// pointer is VEC * sizeof(element)-byte aligned; otherwise the scalar instantiation runs.
// x, w, b and y are all of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or
// bf16; w and b have the activations' type, as LayerNorm parameters do in LLM inference); loads
// are widened to fp32, the statistics and the affine transform are fp32, y is rounded once on the
// store.
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
#ifndef KF_WELFORD
#define KF_WELFORD 1
#endif
#ifndef KF_CACHE_ROW
#define KF_CACHE_ROW 0
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 64 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [64, 1024]");
// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_WELFORD == 0 || KF_WELFORD == 1, "WELFORD is 0 or 1");
static_assert(KF_CACHE_ROW == 0 || KF_CACHE_ROW == 1, "CACHE_ROW is 0 or 1");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;

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

/// Running statistics of a set of values. WELFORD: count, mean and sum of squared deviations,
/// merged with Chan et al.'s pairwise formula (1979); else count, sum and sum of squares.
struct Stats {
  float n = 0.0f, a = 0.0f, b = 0.0f;  // (n, mean, M2) or (n, sum, sum of squares)
};

__device__ __forceinline__ void merge(Stats& s, const Stats& o) {
#if KF_WELFORD
  const float n = s.n + o.n;
  if (n == 0.0f) return;
  const float delta = o.a - s.a;
  const float wo = o.n / n;
  s.a += delta * wo;
  s.b += o.b + delta * delta * s.n * wo;
  s.n = n;
#else
  s.n += o.n;
  s.a += o.a;
  s.b += o.b;
#endif
}

/// Folds k values into the thread's statistics (a local mean and M2 first, then one merge).
template <int K>
__device__ __forceinline__ void accumulate(Stats& s, const float (&v)[K]) {
  Stats local;
  local.n = static_cast<float>(K);
#if KF_WELFORD
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) sum += v[k];
  local.a = sum * (1.0f / K);
#pragma unroll
  for (int k = 0; k < K; ++k) local.b += (v[k] - local.a) * (v[k] - local.a);
#else
#pragma unroll
  for (int k = 0; k < K; ++k) {
    local.a += v[k];
    local.b += v[k] * v[k];
  }
#endif
  merge(s, local);
}

__device__ __forceinline__ Stats block_merge(Stats s, Stats* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Stats other;
    other.n = __shfl_xor_sync(0xffffffffu, s.n, o);
    other.a = __shfl_xor_sync(0xffffffffu, s.a, o);
    other.b = __shfl_xor_sync(0xffffffffu, s.b, o);
    merge(s, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kWarps ? red[lane] : Stats{};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      Stats other;
      other.n = __shfl_xor_sync(0xffffffffu, s.n, o);
      other.a = __shfl_xor_sync(0xffffffffu, s.a, o);
      other.b = __shfl_xor_sync(0xffffffffu, s.b, o);
      merge(s, other);
    }
  }
  return s;  // valid in thread 0
}

template <int V>
__device__ __forceinline__ void load_shared(const float* p, float (&v)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = p[k];
}

// CACHE: thread t stages and later reads back only its own vectors, so no barrier guards the
// buffer between the two passes (the block merge's barriers order rows).
template <int V, bool CACHE>
__global__ void __launch_bounds__(kThreads)
layernorm_block_per_row(const kf_elem* __restrict__ x, const kf_elem* __restrict__ w,
                        const kf_elem* __restrict__ b, kf_elem* __restrict__ y, int64_t rows,
                        int64_t cols, float eps) {
  constexpr int U = KF_UNROLL;
  extern __shared__ float4 cache_raw[];  // float4: 16-byte aligned
  float* cache = reinterpret_cast<float*>(cache_raw);
  __shared__ Stats red[kWarps];
  __shared__ float2 row_stats;
  const int64_t nvec = cols / V;

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const kf_elem* xr = x + row * cols;
    kf_elem* yr = y + row * cols;
    Stats s;
    int64_t i = threadIdx.x;
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float v[U * V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float t[V];
        kf::load_vec<V>(xr + (i + u * kThreads) * V, t);
        if constexpr (CACHE) store_shared<V>(cache + (i + u * kThreads) * V, t);
#pragma unroll
        for (int k = 0; k < V; ++k) v[u * V + k] = t[k];
      }
      accumulate<U * V>(s, v);
    }
    for (; i < nvec; i += kThreads) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
      if constexpr (CACHE) store_shared<V>(cache + i * V, v);
      accumulate<V>(s, v);
    }
    s = block_merge(s, red);
    if (threadIdx.x == 0) {
#if KF_WELFORD
      const float mean = s.a, var = s.b / static_cast<float>(cols);
#else
      const float mean = s.a / static_cast<float>(cols);
      const float var = fmaxf(s.b / static_cast<float>(cols) - mean * mean, 0.0f);
#endif
      row_stats = make_float2(mean, rsqrtf(var + eps));
    }
    __syncthreads();
    const float mean = row_stats.x, rstd = row_stats.y;
    for (i = threadIdx.x; i < nvec; i += kThreads) {
      float v[V], wv[V], bv[V];
      if constexpr (CACHE) {
        load_shared<V>(cache + i * V, v);
      } else {
        kf::load_vec<V>(xr + i * V, v);
      }
      kf::load_vec<V>(w + i * V, wv);
      kf::load_vec<V>(b + i * V, bv);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = (v[k] - mean) * rstd * wv[k] + bv[k];
      kf::store_vec<V>(yr + i * V, v);
    }
    __syncthreads();  // row_stats and red are reused by the next row
  }
}

template <int V>
int launch(const kf_elem* x, const kf_elem* w, const kf_elem* b, kf_elem* y, int64_t rows,
           int64_t cols, float eps, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 0x7fffffff));
  if constexpr (KF_CACHE_ROW != 0) {
    const size_t smem = static_cast<size_t>((cols + 3) / 4) * 16;
    int device = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return static_cast<int>(err);
    if (smem + 1024 <= static_cast<size_t>(optin)) {  // room for the static buffers
      if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(layernorm_block_per_row<V, true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem));
        if (err != cudaSuccess) return static_cast<int>(err);
      }
      layernorm_block_per_row<V, true><<<grid, kThreads, smem, stream>>>(x, w, b, y, rows, cols,
                                                                         eps);
      return static_cast<int>(cudaGetLastError());
    }
  }
  layernorm_block_per_row<V, false><<<grid, kThreads, 0, stream>>>(x, w, b, y, rows, cols, eps);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Inputs x [rows, cols], w [cols], b [cols]; output y [rows, cols]; scalar eps.
// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 a dtype other than the
// compiled element type (x, w, b and y alike), -4 non-compact strides, otherwise a cudaError_t.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || b.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols)
    return -2;
  if (!kf::is_elem(x) || !kf::is_elem(w) || !kf::is_elem(b) || !kf::is_elem(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(w) || !kf::is_compact(b) || !kf::is_compact(y))
    return -4;
  if (rows == 0 || cols == 0) return 0;

  const kf_elem* xp = kf::data_of<const kf_elem>(x);
  const kf_elem* wp = kf::data_of<const kf_elem>(w);
  const kf_elem* bp = kf::data_of<const kf_elem>(b);
  kf_elem* yp = kf::data_of<kf_elem>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * kf::kElemBytes;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && kf::aligned(xp, bytes) &&
                   kf::aligned(wp, bytes) && kf::aligned(bp, bytes) && kf::aligned(yp, bytes);
  if (vec) return launch<KF_VEC>(xp, wp, bp, yp, rows, cols, eps, stream);
  return launch<1>(xp, wp, bp, yp, rows, cols, eps, stream);
}

// RMSNorm over channels, one thread per reduced vector: for x viewed as [N, C, S],
// y[n, c, s] = x[n, c, s] * rsqrt(mean_c(x[n, :, s]^2) + eps). The "row" a thread reduces is the
// C values of one (n, s), S floats apart; consecutive threads take consecutive s, so every load
// and store of a warp is coalesced. Each thread owns VEC consecutive s (one VEC-wide load per
// channel) times ROWS_PER_THREAD such vectors, blockDim apart; UNROLL channels' loads are issued
// before their FMAs. Grid-stride over the N * S / VEC vectors. fp32 accumulate.
// CACHE_ROW = 0: two passes, the second re-reads x (from L2 or DRAM). CACHE_ROW = 1: the thread
// keeps its C * VEC * ROWS_PER_THREAD values in registers when that fits kCacheFloats (C <= 128
// at VEC 1 and 256 threads, C <= 32 at VEC 4); larger C runs the two-pass kernel.
// Vector loads only when S % VEC == 0 and both base pointers are VEC*4-byte aligned (then every
// (n, c) plane starts aligned); otherwise the scalar instantiation runs.
#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 256
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 4
#endif
#ifndef KF_ROWS_PER_THREAD
#define KF_ROWS_PER_THREAD 1
#endif
#ifndef KF_CACHE_ROW
#define KF_CACHE_ROW 0
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS is a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_ROWS_PER_THREAD >= 1 && KF_ROWS_PER_THREAD <= 4, "ROWS_PER_THREAD in [1, 4]");
static_assert(KF_CACHE_ROW == 0 || KF_CACHE_ROW == 1, "CACHE_ROW is 0 or 1");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kRows = KF_ROWS_PER_THREAD;
// Floats of x one thread may cache: ptxas allows 255 registers per thread, and at most
// 65536 / kThreads for a full block to be resident; ~40 go to addresses, sums and the loop.
constexpr int kCacheFloats = kThreads <= 256 ? 128 : 64;

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int V>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(p));
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = __ldg(p);
  }
}

template <int V>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
    p[0] = v[0];
  }
}

// Offsets of this thread's kRows vectors for the grid-stride step starting at `first`. Vectors
// past the end get offset 0 (a valid address: loads stay in bounds) and valid = false.
template <int V>
__device__ __forceinline__ void row_offsets(int64_t first, int64_t vectors, int64_t nvec,
                                            int64_t c, int64_t s, int64_t (&off)[kRows],
                                            bool (&valid)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t v = first + static_cast<int64_t>(r) * kThreads;
    valid[r] = v < vectors;
    off[r] = valid[r] ? (v / nvec) * c * s + (v % nvec) * V : 0;
  }
}

template <int V>
__global__ void __launch_bounds__(kThreads)
rmsnorm_channels_two_pass(const float* __restrict__ x, float* __restrict__ y, int64_t vectors,
                          int64_t nvec, int64_t c, int64_t s, float eps) {
  constexpr int U = KF_UNROLL;
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * kRows;
#pragma unroll 1
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kRows + threadIdx.x;
       first < vectors; first += step) {
    int64_t off[kRows];
    bool valid[kRows];
    row_offsets<V>(first, vectors, nvec, c, s, off, valid);

    float acc[kRows][V] = {};
    int64_t k = 0;
#pragma unroll 1
    for (; k + U <= c; k += U) {
      float v[U][kRows][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) load_vec<V>(x + off[r] + (k + u) * s, v[u][r]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int j = 0; j < V; ++j) acc[r][j] = fmaf(v[u][r][j], v[u][r][j], acc[r][j]);
    }
#pragma unroll 1
    for (; k < c; ++k) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float v[V];
        load_vec<V>(x + off[r] + k * s, v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[r][j] = fmaf(v[j], v[j], acc[r][j]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][j] = rsqrtf(acc[r][j] * inv_c + eps);

    k = 0;
#pragma unroll 1
    for (; k + U <= c; k += U) {
      float v[U][kRows][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) load_vec<V>(x + off[r] + (k + u) * s, v[u][r]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[u][r][j] *= acc[r][j];
          if (valid[r]) store_vec<V>(y + off[r] + (k + u) * s, v[u][r]);
        }
    }
#pragma unroll 1
    for (; k < c; ++k) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float v[V];
        load_vec<V>(x + off[r] + k * s, v);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] *= acc[r][j];
        if (valid[r]) store_vec<V>(y + off[r] + k * s, v);
      }
    }
  }
}

// CAP channels' values of this thread's vectors stay in registers between the two passes (every
// index is a compile-time constant after unrolling); requires c <= CAP.
template <int V, int CAP>
__global__ void __launch_bounds__(kThreads)
rmsnorm_channels_cached(const float* __restrict__ x, float* __restrict__ y, int64_t vectors,
                        int64_t nvec, int64_t c, int64_t s, float eps) {
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * kRows;
#pragma unroll 1
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kRows + threadIdx.x;
       first < vectors; first += step) {
    int64_t off[kRows];
    bool valid[kRows];
    row_offsets<V>(first, vectors, nvec, c, s, off, valid);

    float v[CAP][kRows][V];
#pragma unroll
    for (int k = 0; k < CAP; ++k)
      if (k < c)
#pragma unroll
        for (int r = 0; r < kRows; ++r) load_vec<V>(x + off[r] + k * s, v[k][r]);
    float acc[kRows][V] = {};
#pragma unroll
    for (int k = 0; k < CAP; ++k)
      if (k < c)
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int j = 0; j < V; ++j) acc[r][j] = fmaf(v[k][r][j], v[k][r][j], acc[r][j]);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][j] = rsqrtf(acc[r][j] * inv_c + eps);
#pragma unroll
    for (int k = 0; k < CAP; ++k)
      if (k < c)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[k][r][j] *= acc[r][j];
          if (valid[r]) store_vec<V>(y + off[r] + k * s, v[k][r]);
        }
  }
}

template <int V>
int launch(const float* x, float* y, int64_t n, int64_t c, int64_t s, float eps,
           cudaStream_t stream) {
  const int64_t nvec = s / V;  // V divides s on the vector path
  const int64_t vectors = n * nvec;
  const int64_t blocks = (vectors + kThreads * kRows - 1) / (kThreads * kRows);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff));
  constexpr int cap = kCacheFloats / (V * kRows);
  if (KF_CACHE_ROW && c <= cap)
    rmsnorm_channels_cached<V, cap><<<grid, kThreads, 0, stream>>>(x, y, vectors, nvec, c, s, eps);
  else
    rmsnorm_channels_two_pass<V><<<grid, kThreads, 0, stream>>>(x, y, vectors, nvec, c, s, eps);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 3 || y.ndim != 3) return -2;
  const int64_t n = x.shape[0], c = x.shape[1], s = x.shape[2];
  if (y.shape[0] != n || y.shape[1] != c || y.shape[2] != s) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (n == 0 || c == 0 || s == 0) return 0;

  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && s % KF_VEC == 0 && aligned(xp, bytes) && aligned(yp, bytes);
  return vec ? launch<KF_VEC>(xp, yp, n, c, s, eps, stream)
             : launch<1>(xp, yp, n, c, s, eps, stream);
}

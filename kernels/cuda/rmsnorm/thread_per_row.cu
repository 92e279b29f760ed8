// RMSNorm, one thread per row: y[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * w[c].
// Each thread walks its own row sequentially (VEC floats per load, UNROLL loads in flight), so no
// reduction across threads is needed; neighbouring threads read different rows, so a warp's
// loads are not coalesced and rely on L1 to reuse each 128-byte line over the following loads.
// Meant for short rows (tens to a few hundred columns) and many rows; a poor fit for long rows
// or few rows (too few threads). Grid-stride over rows. fp32 accumulate. Vector loads only when
// every row start is VEC*4-byte aligned (base pointers aligned and cols % VEC == 0); otherwise
// the scalar instantiation runs.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 128
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 1
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
// Register budget: the UNROLL*VEC floats of x and w in flight plus ~32 for addressing and
// sums, turned into a cap through __launch_bounds__ (65536 registers per SM) so ptxas does not
// squeeze to 32 registers and spill.
constexpr int kRegBudget = 2 * KF_UNROLL * KF_VEC + 32;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

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

template <int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
rmsnorm_thread_per_row(const float* __restrict__ x, const float* __restrict__ w,
                       float* __restrict__ y, int64_t rows, int64_t cols, float eps) {
  constexpr int U = KF_UNROLL;
  const int64_t nvec = cols / V;  // V divides cols on the vector path
  const float inv_cols = 1.0f / static_cast<float>(cols);

#pragma unroll 1
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kThreads) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;
    int64_t i = 0;
#pragma unroll 1
    for (; i + U <= nvec; i += U) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec<V>(xr + (i + u) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] = fmaf(v[u][k], v[u][k], acc[u]);
    }
#pragma unroll 1
    for (; i < nvec; ++i) {
      float v[V];
      load_vec<V>(xr + i * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] = fmaf(v[k], v[k], acc[0]);
    }
    float ss = acc[0];
#pragma unroll
    for (int u = 1; u < U; ++u) ss += acc[u];
    const float inv = rsqrtf(ss * inv_cols + eps);

    i = 0;
#pragma unroll 1
    for (; i + U <= nvec; i += U) {
      float v[U][V], g[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        load_vec<V>(xr + (i + u) * V, v[u]);
        load_vec<V>(w + (i + u) * V, g[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = v[u][k] * inv * g[u][k];
        store_vec<V>(yr + (i + u) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; ++i) {
      float v[V], g[V];
      load_vec<V>(xr + i * V, v);
      load_vec<V>(w + i * V, g);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = v[k] * inv * g[k];
      store_vec<V>(yr + i * V, v);
    }
  }
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  if (rows == 0 || cols == 0) return 0;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  float* yp = data_of<float>(y);
  const float eps = static_cast<float>(args->scalars[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);

  const int64_t blocks = (rows + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff));
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && aligned(xp, bytes) && aligned(wp, bytes) &&
                   aligned(yp, bytes);
  if (vec)
    rmsnorm_thread_per_row<KF_VEC><<<grid, kThreads, 0, stream>>>(xp, wp, yp, rows, cols, eps);
  else
    rmsnorm_thread_per_row<1><<<grid, kThreads, 0, stream>>>(xp, wp, yp, rows, cols, eps);
  return static_cast<int>(cudaGetLastError());
}

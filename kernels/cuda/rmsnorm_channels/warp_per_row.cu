// RMSNorm over channels, a warp per row: for x viewed as [N, C, S], y[n, c, s] = x[n, c, s] *
// rsqrt(mean_c(x[n, :, s]^2) + eps), each (n, s) row's C values reduced by one warp. Made for
// S = 1, which is what an RMSNorm over the last dim without a weight derives to (a [rows, cols]
// module is [n = rows, c = cols, s = 1]): there a row is C contiguous floats, every warp load is
// 32 * VEC * 4 contiguous bytes, and the reduction is warp shuffles only (no shared memory, no
// barrier). The other two decompositions put lanes on consecutive s, which at S = 1 leaves one
// lane of 32 working (0.14-0.28x of eager on an H100 at [8192, 4096]). For S > 1 this one is
// correct but strided (a lane's channels are S floats apart): the search will prefer the others.
// UNROLL vectors of a lane are loaded before their FMAs. CACHE_ROW keeps a lane's vectors in
// registers for the write pass when C <= 8 * 32 * VEC, else the write pass re-reads the row (just
// read: L1 or L2). Grid-stride over N * S rows, BLOCK_THREADS / 32 rows per block. fp32 accumulate.
// Vector loads only when S == 1, C % VEC == 0 and both base pointers are VEC*4-byte aligned;
// otherwise the scalar instantiation runs.
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
#ifndef KF_CACHE_ROW
#define KF_CACHE_ROW 0
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS is a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_CACHE_ROW == 0 || KF_CACHE_ROW == 1, "CACHE_ROW is 0 or 1");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = kThreads / 32;
// Vectors a lane keeps in registers with CACHE_ROW (C <= kCached * 32 * VEC).
constexpr int kCached = 8;

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Element i * V .. i * V + V - 1 of a row whose channels are `s` floats apart (V > 1 only when
// s == 1, where they are contiguous).
template <int V>
__device__ __forceinline__ void load_vec(const float* row, int64_t i, int64_t s, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(row + i * 4));
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(row + i * 2));
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = __ldg(row + i * s);
  }
}

template <int V>
__device__ __forceinline__ void store_vec(float* row, int64_t i, int64_t s, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(row + i * 4) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(row + i * 2) = make_float2(v[0], v[1]);
  } else {
    row[i * s] = v[0];
  }
}

template <int V, bool CACHE>
__global__ void __launch_bounds__(kThreads)
rmsnorm_rows_warp(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t c,
                  int64_t s, float eps) {
  constexpr int U = KF_UNROLL;
  const int lane = threadIdx.x & 31;
  const int64_t vectors = c / V;  // V divides c on the vector path
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;

#pragma unroll 1
  for (int64_t row = first; row < rows; row += stride) {
    const int64_t n = row / s;
    const int64_t sp = row - n * s;
    const float* xr = x + n * c * s + sp;
    float* yr = y + (xr - x);

    float acc = 0.0f;
    [[maybe_unused]] float cached[CACHE ? kCached : 1][V];
    if constexpr (CACHE) {
#pragma unroll
      for (int q = 0; q < kCached; ++q) {
        const int64_t i = lane + int64_t{q} * 32;
        if (i < vectors) load_vec<V>(xr, i, s, cached[q]);
      }
#pragma unroll
      for (int q = 0; q < kCached; ++q) {
        if (lane + int64_t{q} * 32 < vectors) {
#pragma unroll
          for (int j = 0; j < V; ++j) acc = fmaf(cached[q][j], cached[q][j], acc);
        }
      }
    } else {
      int64_t i = lane;
#pragma unroll 1
      for (; i + int64_t{U - 1} * 32 < vectors; i += U * 32) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec<V>(xr, i + u * 32, s, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < V; ++j) acc = fmaf(v[u][j], v[u][j], acc);
      }
#pragma unroll 1
      for (; i < vectors; i += 32) {
        float v[V];
        load_vec<V>(xr, i, s, v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc = fmaf(v[j], v[j], acc);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    }
    const float inv = rsqrtf(acc * inv_c + eps);

    if constexpr (CACHE) {
#pragma unroll
      for (int q = 0; q < kCached; ++q) {
        const int64_t i = lane + int64_t{q} * 32;
        if (i < vectors) {
#pragma unroll
          for (int j = 0; j < V; ++j) cached[q][j] *= inv;
          store_vec<V>(yr, i, s, cached[q]);
        }
      }
    } else {
      int64_t i = lane;
#pragma unroll 1
      for (; i + int64_t{U - 1} * 32 < vectors; i += U * 32) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec<V>(xr, i + u * 32, s, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[u][j] *= inv;
          store_vec<V>(yr, i + u * 32, s, v[u]);
        }
      }
#pragma unroll 1
      for (; i < vectors; i += 32) {
        float v[V];
        load_vec<V>(xr, i, s, v);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] *= inv;
        store_vec<V>(yr, i, s, v);
      }
    }
  }
}

template <int V>
int launch(const float* x, float* y, int64_t n, int64_t c, int64_t s, float eps,
           cudaStream_t stream) {
  const int64_t rows = n * s;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  // Grid-stride beyond 2^20 blocks: a row per warp per pass is enough to fill any GPU.
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, int64_t{1} << 20));
  if (KF_CACHE_ROW && c <= int64_t{kCached} * 32 * V) {
    rmsnorm_rows_warp<V, true><<<grid, kThreads, 0, stream>>>(x, y, rows, c, s, eps);
  } else {
    rmsnorm_rows_warp<V, false><<<grid, kThreads, 0, stream>>>(x, y, rows, c, s, eps);
  }
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
  const bool vec = KF_VEC > 1 && s == 1 && c % KF_VEC == 0 && aligned(xp, bytes) &&
                   aligned(yp, bytes);
  return vec ? launch<KF_VEC>(xp, yp, n, c, s, eps, stream)
             : launch<1>(xp, yp, n, c, s, eps, stream);
}

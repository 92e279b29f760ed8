// RMSNorm over channels, the channels split across the warps of a block: for x viewed as
// [N, C, S], y[n, c, s] = x[n, c, s] * rsqrt(mean_c(x[n, :, s]^2) + eps). A block owns a tile of
// 32 * VEC consecutive s of one n (each lane VEC of them) and its BLOCK_THREADS / 32 warps take
// channels warp, warp + warps, ...: every warp load is 32 * VEC * 4 contiguous bytes, and a
// thread walks only C / warps channels, so large C keeps many loads in flight per s. Partial sums
// meet in shared memory, then the same warps re-read their channels (the tile was just read: L1
// or L2) and write y. UNROLL of a warp's channels are loaded before their FMAs. Grid-stride over
// the N * ceil(S / (32 * VEC)) tiles. fp32 accumulate.
// Vector loads only when S % VEC == 0 and both base pointers are VEC*4-byte aligned; otherwise
// the scalar instantiation runs.
// CACHE_ROW = 1 keeps a thread's channels in registers between the two passes (at most
// kCachedChannels per warp, i.e. C <= 8 * BLOCK_THREADS / 32; larger C runs the re-read path):
// all of a thread's loads are issued before the first FMA, and the write pass re-reads nothing.
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
#define KF_UNROLL 2
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
// Channels a thread keeps in registers with CACHE_ROW (C <= kCachedChannels * kWarps).
constexpr int kCachedChannels = 8;

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

template <int V, bool CACHE>
__global__ void __launch_bounds__(kThreads)
rmsnorm_channels_split(const float* __restrict__ x, float* __restrict__ y, int64_t tiles,
                       int64_t tiles_per_n, int64_t c, int64_t s, float eps) {
  constexpr int U = KF_UNROLL;
  // [warp][element of the vector][lane]: lanes write consecutive words, no bank conflicts.
  __shared__ float partial[kWarps][V][32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t plane_step = static_cast<int64_t>(kWarps) * s;

#pragma unroll 1
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t n = tile / tiles_per_n;
    const int64_t sp = (tile % tiles_per_n) * (32 * V) + lane * V;
    // V divides s on the vector path, so a vector is either wholly in range or wholly out.
    // Lanes out of range read the tile's first vector (in bounds) and store nothing.
    const bool valid = sp < s;
    const float* xs = x + n * c * s + (valid ? sp : 0) + warp * s;

    float acc[V] = {};
    // CACHE: the thread's channels (at most kCachedChannels), all loads before the first FMA.
    [[maybe_unused]] float cached[CACHE ? kCachedChannels : 1][V];
    if constexpr (CACHE) {
#pragma unroll
      for (int q = 0; q < kCachedChannels; ++q) {
        if (warp + int64_t{q} * kWarps < c) load_vec<V>(xs + q * plane_step, cached[q]);
      }
#pragma unroll
      for (int q = 0; q < kCachedChannels; ++q) {
        if (warp + int64_t{q} * kWarps < c) {
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = fmaf(cached[q][j], cached[q][j], acc[j]);
        }
      }
    } else {
      int64_t k = warp;
      const float* p = xs;
#pragma unroll 1
      for (; k + static_cast<int64_t>(U - 1) * kWarps < c; k += U * kWarps, p += U * plane_step) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec<V>(p + u * plane_step, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = fmaf(v[u][j], v[u][j], acc[j]);
      }
#pragma unroll 1
      for (; k < c; k += kWarps, p += plane_step) {
        float v[V];
        load_vec<V>(p, v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = fmaf(v[j], v[j], acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) partial[warp][j][lane] = acc[j];
    __syncthreads();
    float inv[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][j][lane];
      inv[j] = rsqrtf(sum * inv_c + eps);
    }
    __syncthreads();  // partial is rewritten by the next tile

    float* ys = y + (xs - x);
    if constexpr (CACHE) {
#pragma unroll
      for (int q = 0; q < kCachedChannels; ++q) {
        if (warp + int64_t{q} * kWarps < c) {
#pragma unroll
          for (int j = 0; j < V; ++j) cached[q][j] *= inv[j];
          if (valid) store_vec<V>(ys + q * plane_step, cached[q]);
        }
      }
    } else {
      int64_t k = warp;
      int64_t o = 0;
#pragma unroll 1
      for (; k + static_cast<int64_t>(U - 1) * kWarps < c; k += U * kWarps, o += U * plane_step) {
        float v[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec<V>(xs + o + u * plane_step, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[u][j] *= inv[j];
          if (valid) store_vec<V>(ys + o + u * plane_step, v[u]);
        }
      }
#pragma unroll 1
      for (; k < c; k += kWarps, o += plane_step) {
        float v[V];
        load_vec<V>(xs + o, v);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] *= inv[j];
        if (valid) store_vec<V>(ys + o, v);
      }
    }
  }
}

template <int V>
int launch(const float* x, float* y, int64_t n, int64_t c, int64_t s, float eps,
           cudaStream_t stream) {
  const int64_t tiles_per_n = (s + 32 * V - 1) / (32 * V);
  const int64_t tiles = n * tiles_per_n;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, 0x7fffffff));
  if (KF_CACHE_ROW && c <= int64_t{kCachedChannels} * kWarps) {
    rmsnorm_channels_split<V, true>
        <<<grid, kThreads, 0, stream>>>(x, y, tiles, tiles_per_n, c, s, eps);
  } else {
    rmsnorm_channels_split<V, false>
        <<<grid, kThreads, 0, stream>>>(x, y, tiles, tiles_per_n, c, s, eps);
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
  const bool vec = KF_VEC > 1 && s % KF_VEC == 0 && aligned(xp, bytes) && aligned(yp, bytes);
  return vec ? launch<KF_VEC>(xp, yp, n, c, s, eps, stream)
             : launch<1>(xp, yp, n, c, s, eps, stream);
}

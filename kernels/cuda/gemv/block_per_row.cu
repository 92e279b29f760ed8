// Matrix-vector product y = A x (A row-major [rows, cols]), one block per row.
// BLOCK_THREADS threads take a strided slice of the row's columns (VEC floats per load, UNROLL
// loads in flight, UNROLL partial sums), then warp shuffles plus one shared-memory step reduce
// the block's partial dot products. Suits long rows and few rows (every SM gets whole rows);
// for many short rows the per-row reduction and barrier dominate. Grid-stride over rows.
// fp32 accumulate. Vector loads only when every row start is VEC*4-byte aligned (A and x
// aligned and cols % VEC == 0); otherwise the scalar instantiation runs.
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
#define KF_UNROLL 1
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;
// Register budget: the UNROLL*VEC floats of A and x in flight, UNROLL partial sums and ~32 for
// addressing; turned into a cap through __launch_bounds__ (65536 registers per SM) so ptxas
// does not squeeze to 32 registers and spill.
constexpr int kRegBudget = 2 * KF_UNROLL * KF_VEC + KF_UNROLL + 32;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);

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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, valid in thread 0. red[] holds kWarps partials. The caller's barrier at
// the end of each row keeps the next row's writes to red[] behind warp 0's reads.
__device__ __forceinline__ float block_sum_to_thread0(float v, float* red) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  if (warp == 0) {
    t = lane < kWarps ? red[lane] : 0.0f;
    t = warp_sum(t);
  }
  return t;
}

template <int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
gemv_block_per_row(const float* __restrict__ a, const float* __restrict__ x,
                   float* __restrict__ y, int64_t rows, int64_t cols) {
  constexpr int U = KF_UNROLL;
  __shared__ float red[32];
  const int64_t nvec = cols / V;  // V divides cols on the vector path

#pragma unroll 1
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* ar = a + row * cols;
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;

    int64_t i = threadIdx.x;
#pragma unroll 1
    for (; i + (U - 1) * kThreads < nvec; i += U * kThreads) {
      float av[U][V], xv[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        load_vec<V>(ar + (i + u * kThreads) * V, av[u]);
        load_vec<V>(x + (i + u * kThreads) * V, xv[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] = fmaf(av[u][k], xv[u][k], acc[u]);
    }
#pragma unroll 1
    for (; i < nvec; i += kThreads) {
      float av[V], xv[V];
      load_vec<V>(ar + i * V, av);
      load_vec<V>(x + i * V, xv);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] = fmaf(av[k], xv[k], acc[0]);
    }
    float s = acc[0];
#pragma unroll
    for (int u = 1; u < U; ++u) s += acc[u];
    s = block_sum_to_thread0(s, red);
    if (threadIdx.x == 0) y[row] = s;
    __syncthreads();  // red[] is rewritten by the next row
  }
}

}  // namespace

// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != cols || y.shape[0] != rows) return -2;
  if (!kf::is_f32(a) || !kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(a) || !kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (rows == 0) return 0;

  const float* ap = kf::data_of<const float>(a);
  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);

  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 0x7fffffff));
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && aligned(ap, bytes) && aligned(xp, bytes);
  if (vec)
    gemv_block_per_row<KF_VEC><<<grid, kThreads, 0, stream>>>(ap, xp, yp, rows, cols);
  else
    gemv_block_per_row<1><<<grid, kThreads, 0, stream>>>(ap, xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

// Matrix-vector product y = A x (A row-major [rows, cols]), one warp per ROWS_PER_WARP rows.
// The lanes of a warp take a strided slice of the columns (VEC floats per load, UNROLL loads in
// flight per row); each chunk of x is loaded once and used for all ROWS_PER_WARP rows, which cuts
// the L1/L2 traffic for x by that factor; shuffle reductions give the dot products.
// BLOCK_THREADS / 32 warps per block, grid-stride over row groups. fp32 accumulate (UNROLL
// partial sums per row). Vector loads only when every row start is VEC*4-byte aligned (A and x
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
#ifndef KF_ROWS_PER_WARP
#define KF_ROWS_PER_WARP 1
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 1
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_ROWS_PER_WARP >= 1 && KF_ROWS_PER_WARP <= 8, "ROWS_PER_WARP in [1, 8]");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kWarps = KF_BLOCK_THREADS / 32;
constexpr int kRowsPerBlock = kWarps * KF_ROWS_PER_WARP;
// Register budget: UNROLL*VEC floats of x plus ROWS_PER_WARP times as many of A in flight, the
// ROWS_PER_WARP*UNROLL partial sums, two per row pointer, ~48 for addressing and the rest;
// turned into a cap through __launch_bounds__ (65536 registers per SM) so ptxas does not
// squeeze to 32 and spill.
constexpr int kRegBudget = (KF_ROWS_PER_WARP + 1) * KF_UNROLL * KF_VEC +
                           KF_ROWS_PER_WARP * (KF_UNROLL + 2) + 48;
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

template <int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
gemv_warp_per_row(const float* __restrict__ a, const float* __restrict__ x,
                  float* __restrict__ y, int64_t rows, int64_t cols) {
  constexpr int U = KF_UNROLL;
  constexpr int R = KF_ROWS_PER_WARP;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t nvec = cols / V;  // V divides cols on the vector path

  // row0 is the same for all 32 lanes, so the loop and the shuffles are warp-uniform.
#pragma unroll 1
  for (int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R; row0 < rows;
       row0 += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    // Rows past the end (last group only) alias the last row: loads stay in bounds, results
    // are not stored.
    const float* ar[R];
#pragma unroll
    for (int r = 0; r < R; ++r) ar[r] = a + (row0 + r < rows ? row0 + r : rows - 1) * cols;

    float acc[R][U];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < U; ++u) acc[r][u] = 0.0f;

    int64_t i = lane;
#pragma unroll 1
    for (; i + (U - 1) * 32 < nvec; i += U * 32) {
      float xv[U][V];
      float av[R][U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec<V>(x + (i + u * 32) * V, xv[u]);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec<V>(ar[r] + (i + u * 32) * V, av[r][u]);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < V; ++k) acc[r][u] = fmaf(av[r][u][k], xv[u][k], acc[r][u]);
    }
#pragma unroll 1
    for (; i < nvec; i += 32) {
      float xv[V];
      load_vec<V>(x + i * V, xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float av[V];
        load_vec<V>(ar[r] + i * V, av);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[r][0] = fmaf(av[k], xv[k], acc[r][0]);
      }
    }

#pragma unroll
    for (int r = 0; r < R; ++r) {
      float s = acc[r][0];
#pragma unroll
      for (int u = 1; u < U; ++u) s += acc[r][u];
      s = warp_sum(s);
      if (lane == 0 && row0 + r < rows) y[row0 + r] = s;
    }
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

  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff));
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && aligned(ap, bytes) && aligned(xp, bytes);
  if (vec)
    gemv_warp_per_row<KF_VEC><<<grid, kThreads, 0, stream>>>(ap, xp, yp, rows, cols);
  else
    gemv_warp_per_row<1><<<grid, kThreads, 0, stream>>>(ap, xp, yp, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

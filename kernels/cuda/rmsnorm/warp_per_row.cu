// RMSNorm, one warp per row: y[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * w[c].
// Each lane sums the squares of a strided slice of the row (VEC elements per load, UNROLL loads
// in flight), a shuffle reduction gives the row's sum, then the lanes re-read x (from L1/L2) and
// write y. ROWS_PER_BLOCK warps per block, grid-stride over rows.
// x, w and y are all of the element type KF_DTYPE (kernels/cuda/common/elem.cuh: f32, f16 or bf16;
// w has the activations' type, as RMSNorm weights do in LLM inference); loads are widened to
// fp32, the sum and the scaling are fp32, y is rounded once on the store.
// Vector loads only when every row start is VEC * sizeof(element)-byte aligned (base pointers
// aligned and cols % VEC == 0); otherwise the scalar instantiation runs.
#include <cuda/common/elem.cuh>

#include <algorithm>
#include <cstdint>

#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_ROWS_PER_BLOCK
#define KF_ROWS_PER_BLOCK 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 1
#endif

// VEC = 8 only for 2-byte elements: one 16-byte access, like VEC = 4 of fp32.
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || (KF_VEC == 8 && kf::kElemBytes == 2),
              "VEC must be 1, 2 or 4 (or 8 for f16/bf16)");
static_assert(KF_ROWS_PER_BLOCK >= 1 && KF_ROWS_PER_BLOCK <= 32, "ROWS_PER_BLOCK in [1, 32]");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace {

constexpr int kThreads = KF_ROWS_PER_BLOCK * 32;
// Register budget: the UNROLL*VEC floats of x and w in flight plus ~32 for addressing and
// sums, turned into a cap through __launch_bounds__ (65536 registers per SM) so ptxas does not
// squeeze to 32 registers and spill.
constexpr int kRegBudget = 2 * KF_UNROLL * KF_VEC + 32;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
rmsnorm_warp_per_row(const kf_elem* __restrict__ x, const kf_elem* __restrict__ w,
                     kf_elem* __restrict__ y, int64_t rows, int64_t cols, float eps) {
  constexpr int U = KF_UNROLL;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t nvec = cols / V;  // V divides cols on the vector path
  const float inv_cols = 1.0f / static_cast<float>(cols);

  // The row is the same for all 32 lanes, so the loop and the shuffles are warp-uniform.
#pragma unroll 1
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * KF_ROWS_PER_BLOCK + warp; row < rows;
       row += static_cast<int64_t>(gridDim.x) * KF_ROWS_PER_BLOCK) {
    const kf_elem* xr = x + row * cols;
    kf_elem* yr = y + row * cols;

    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.0f;
    int64_t i = lane;
#pragma unroll 1
    for (; i + (U - 1) * 32 < nvec; i += U * 32) {
      float v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] = fmaf(v[u][k], v[u][k], acc[u]);
    }
#pragma unroll 1
    for (; i < nvec; i += 32) {
      float v[V];
      kf::load_vec<V>(xr + i * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] = fmaf(v[k], v[k], acc[0]);
    }
    float ss = acc[0];
#pragma unroll
    for (int u = 1; u < U; ++u) ss += acc[u];
    ss = warp_sum(ss);
    const float inv = rsqrtf(ss * inv_cols + eps);

    i = lane;
#pragma unroll 1
    for (; i + (U - 1) * 32 < nvec; i += U * 32) {
      float v[U][V], g[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        kf::load_vec<V>(xr + (i + u * 32) * V, v[u]);
        kf::load_vec<V>(w + (i + u * 32) * V, g[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u][k] = v[u][k] * inv * g[u][k];
        kf::store_vec<V>(yr + (i + u * 32) * V, v[u]);
      }
    }
#pragma unroll 1
    for (; i < nvec; i += 32) {
      float v[V], g[V];
      kf::load_vec<V>(xr + i * V, v);
      kf::load_vec<V>(w + i * V, g);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = v[k] * inv * g[k];
      kf::store_vec<V>(yr + i * V, v);
    }
  }
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 a dtype other than the
// compiled element type (x, w and y alike), -4 non-compact strides, otherwise the cudaError_t of
// the launch.
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

  const int64_t blocks = (rows + KF_ROWS_PER_BLOCK - 1) / KF_ROWS_PER_BLOCK;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff));
  constexpr int bytes = KF_VEC * kf::kElemBytes;
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && kf::aligned(xp, bytes) &&
                   kf::aligned(wp, bytes) && kf::aligned(yp, bytes);
  if (vec)
    rmsnorm_warp_per_row<KF_VEC><<<grid, kThreads, 0, stream>>>(xp, wp, yp, rows, cols, eps);
  else
    rmsnorm_warp_per_row<1><<<grid, kThreads, 0, stream>>>(xp, wp, yp, rows, cols, eps);
  return static_cast<int>(cudaGetLastError());
}

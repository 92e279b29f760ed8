// Transposed matrix-vector product y = A^T x (A row-major [rows, cols], x [rows], y [cols]):
// y[c] = sum_r A[r, c] * x[r]. One thread per VEC adjacent columns.
// A warp reads 32 * VEC consecutive floats of one row per load (coalesced), and each thread walks
// down the rows of its block's row chunk with UNROLL rows' loads in flight, accumulating its VEC
// columns in registers: no reduction across threads. The chunk's x is staged in shared memory,
// BLOCK_THREADS rows at a time (one coalesced load, then broadcast reads).
// Grid: (column blocks of BLOCK_THREADS * VEC columns) x (row chunks). Few columns give few
// column blocks, so the rows are split into SPLIT_ROWS chunks along blockIdx.y (0 = auto) whose
// partial sums are combined by atomics (ATOMIC_COMBINE = 1) or a deterministic workspace pass
// (kernels/cuda/common/gemv_t_split.cuh, shared with tile_transpose). fp32 accumulate. Vector loads
// only when cols % VEC == 0 and A is VEC*4-byte aligned (every row start then is); otherwise the
// scalar instantiation runs.
#include <cuda/common/gemv_t_split.cuh>

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
#ifndef KF_SPLIT_ROWS
#define KF_SPLIT_ROWS 0
#endif
#ifndef KF_ATOMIC_COMBINE
#define KF_ATOMIC_COMBINE 1
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS must be a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_SPLIT_ROWS >= 0 && KF_SPLIT_ROWS <= 65535, "SPLIT_ROWS in [0, 65535]");
static_assert(KF_ATOMIC_COMBINE == 0 || KF_ATOMIC_COMBINE == 1, "ATOMIC_COMBINE is 0 or 1");

namespace {

using kf::gemv_t::Combine;
using kf::gemv_t::load_vec;

constexpr int kThreads = KF_BLOCK_THREADS;
// Register budget: UNROLL*VEC floats of A in flight, VEC accumulators, ~40 for addressing and
// loop state; turned into a cap through __launch_bounds__ so ptxas does not squeeze to 32
// registers and spill.
constexpr int kMinBlocks = kf::gemv_t::min_blocks(KF_UNROLL * KF_VEC + KF_VEC + 40, kThreads);

// Block (bx, by) sums rows [by * chunk_rows, min(rows, (by + 1) * chunk_rows)) for columns
// [(bx * kThreads + t) * V, + V) of thread t. V divides cols when V > 1.
template <int V, Combine C>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
gemv_t_column_per_thread(const float* __restrict__ a, const float* __restrict__ x,
                         float* __restrict__ y, int64_t rows, int64_t cols, int64_t chunk_rows) {
  constexpr int U = KF_UNROLL;
  __shared__ float xs[kThreads];
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * V;
  const bool active = col < cols;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r_end = r_begin + chunk_rows < rows ? r_begin + chunk_rows : rows;

  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;

#pragma unroll 1
  for (int64_t t0 = r_begin; t0 < r_end; t0 += kThreads) {
    const int n = static_cast<int>(r_end - t0 < kThreads ? r_end - t0 : kThreads);
    __syncthreads();  // the previous tile's reads of xs are done
    if (threadIdx.x < n) xs[threadIdx.x] = __ldg(x + t0 + threadIdx.x);
    __syncthreads();
    if (!active) continue;
    const float* p = a + t0 * cols + col;
    int i = 0;
#pragma unroll 1
    for (; i + U <= n; i += U) {
      float av[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec<V>(p + u * cols, av[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = fmaf(av[u][k], xs[i + u], acc[k]);
      p += U * cols;
    }
#pragma unroll 1
    for (; i < n; ++i, p += cols) {
      float av[V];
      load_vec<V>(p, av);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = fmaf(av[k], xs[i], acc[k]);
    }
  }
  if (!active) return;
#pragma unroll
  for (int k = 0; k < V; ++k) kf::gemv_t::emit<C>(y, cols, col + k, acc[k]);
}

}  // namespace

// Inputs A [rows, cols], x [rows]; output y [cols]. Error codes: kf::gemv_t::run.
KFORGE_API int kforge_run(const kforge_args* args) {
  return kf::gemv_t::run<KF_VEC>(args, [](auto v, const float* a, const float* x, float* y,
                                          int64_t rows, int64_t cols, cudaStream_t stream) {
    constexpr int V = decltype(v)::value;
    return kf::gemv_t::launch(a, x, y, rows, cols, int64_t{kThreads} * V, kThreads,
                              KF_SPLIT_ROWS, KF_ATOMIC_COMBINE != 0, stream, [](auto c) {
                                return gemv_t_column_per_thread<V, decltype(c)::value>;
                              });
  });
}

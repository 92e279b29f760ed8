// Transposed matrix-vector product y = A^T x (A row-major [rows, cols], x [rows], y [cols]):
// y[c] = sum_r A[r, c] * x[r]. One block per tile of COL_THREADS * VEC columns.
// The block is COL_THREADS column threads by BLOCK_THREADS / COL_THREADS row threads: thread
// (tx, ty) owns VEC adjacent columns and the rows ty, ty + ROW_THREADS, ... of the block's row
// chunk (UNROLL of them in flight), so each warp reads 32 * VEC / COL_THREADS row segments of
// COL_THREADS * VEC contiguous floats (coalesced). At the end the row threads' partials meet in
// shared memory and are summed down each column. Narrow tiles give more column blocks than
// column_per_thread for the same block size, so fewer columns still fill the device without
// splitting the rows. The chunk's x is staged in shared memory, BLOCK_THREADS rows at a time.
// Row chunks (SPLIT_ROWS along blockIdx.y, 0 = auto: the fewest chunks whose grid fills >= 95%
// of the resident-block slots of the device's SMs, each chunk at least kMinChunkRows rows) are
// combined
//   ATOMIC_COMBINE = 1: with atomicAdd into y, zeroed first by cudaMemsetAsync on the stream
//                       (summation order across chunks not deterministic);
//   ATOMIC_COMBINE = 0: through a static device workspace [chunks, cols] and a second kernel that
//                       adds each column's partials in chunk order (deterministic); the chunk
//                       count is capped so that the workspace holds them.
// One chunk stores y directly. fp32 accumulate. Vector loads only when cols % VEC == 0 and A is
// VEC*4-byte aligned (every row start then is); otherwise the scalar instantiation runs. The
// workspace makes concurrent calls on two streams unsafe (one worker runs one call at a time).
#include <kforge/kernel.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 256
#endif
#ifndef KF_COL_THREADS
#define KF_COL_THREADS 32
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
static_assert(KF_COL_THREADS >= 8 && KF_BLOCK_THREADS % KF_COL_THREADS == 0,
              "COL_THREADS must be >= 8 and divide BLOCK_THREADS");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");
static_assert(KF_SPLIT_ROWS >= 0 && KF_SPLIT_ROWS <= 65535, "SPLIT_ROWS in [0, 65535]");
static_assert(KF_ATOMIC_COMBINE == 0 || KF_ATOMIC_COMBINE == 1, "ATOMIC_COMBINE is 0 or 1");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;
constexpr int kColThreads = KF_COL_THREADS;
constexpr int kRowThreads = KF_BLOCK_THREADS / KF_COL_THREADS;
// Register budget: UNROLL*VEC floats of A in flight, VEC accumulators, ~40 for addressing and
// loop state; turned into a cap through __launch_bounds__ (65536 registers per SM) so ptxas
// does not squeeze to 32 registers and spill.
constexpr int kRegBudget = KF_UNROLL * KF_VEC + KF_VEC + 40;
// Clamped to [1, 32]: an SM holds at most 32 blocks, ptxas ignores larger values.
constexpr int kMinBlocksRaw = 65536 / (kRegBudget * kThreads);
constexpr int kMinBlocks = kMinBlocksRaw < 1 ? 1 : (kMinBlocksRaw > 32 ? 32 : kMinBlocksRaw);
// A chunk shorter than this adds a cols-long partial (atomics or workspace) for too few rows:
// at 32 rows the combine traffic is ~3% of A's.
constexpr int64_t kMinChunkRows = 32;
// Workspace of partial sums for ATOMIC_COMBINE = 0: 16 MiB of static device memory.
constexpr int64_t kMaxPartials = int64_t{1} << 22;

__device__ float g_partials[kMaxPartials];

// How a block's partial sums reach y.
enum class Combine { store, atomic, workspace };

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

// Block (bx, by) sums rows [by * chunk_rows, min(rows, (by + 1) * chunk_rows)) for columns
// [bx * kColThreads * V, + kColThreads * V). V divides cols when V > 1.
template <int V, Combine C>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
gemv_t_tile(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
            int64_t rows, int64_t cols, int64_t chunk_rows) {
  constexpr int U = KF_UNROLL;
  constexpr int kTileCols = kColThreads * V;
  __shared__ float xs[kThreads];
  __shared__ float partial[kRowThreads][kTileCols];
  const int tx = threadIdx.x % kColThreads, ty = threadIdx.x / kColThreads;
  const int64_t tile_col = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int64_t col = tile_col + tx * V;
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
    // This thread's rows of the tile: i = ty + j * kRowThreads.
    const float* p = a + (t0 + ty) * cols + col;
    const int64_t step = int64_t{kRowThreads} * cols;
    int i = ty;
#pragma unroll 1
    for (; i + (U - 1) * kRowThreads < n; i += U * kRowThreads) {
      float av[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) load_vec<V>(p + u * step, av[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = fmaf(av[u][k], xs[i + u * kRowThreads], acc[k]);
      p += U * step;
    }
#pragma unroll 1
    for (; i < n; i += kRowThreads, p += step) {
      float av[V];
      load_vec<V>(p, av);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = fmaf(av[k], xs[i], acc[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) partial[ty][tx * V + k] = acc[k];
  __syncthreads();
  // Sum down each column of the tile in row-thread order; consecutive threads, consecutive
  // columns (coalesced stores).
  for (int j = threadIdx.x; j < kTileCols; j += kThreads) {
    const int64_t c = tile_col + j;
    if (c >= cols) break;
    float s = 0.0f;
#pragma unroll 4
    for (int t = 0; t < kRowThreads; ++t) s += partial[t][j];
    if constexpr (C == Combine::atomic) {
      atomicAdd(y + c, s);
    } else if constexpr (C == Combine::workspace) {
      g_partials[blockIdx.y * cols + c] = s;
    } else {
      y[c] = s;
    }
  }
}

// y[c] = sum over chunks j in order of g_partials[j * cols + c]. Grid-stride over columns.
__global__ void gemv_t_sum_partials(float* __restrict__ y, int64_t cols, int chunks) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < chunks; ++j) s += g_partials[j * cols + c];
    y[c] = s;
  }
}

// Resident-block slots of the current device for the V instantiation (SMs * blocks per SM),
// cached per device; 0 if the query fails.
template <int V>
int64_t resident_slots() {
  static int cached_device = -1;
  static int64_t cached_slots = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (device == cached_device) return cached_slots;
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, gemv_t_tile<V, Combine::atomic>, kThreads, 0) != cudaSuccess) {
    return 0;
  }
  cached_device = device;
  cached_slots = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  return cached_slots;
}

// Row chunks for col_blocks column blocks: SPLIT_ROWS if set, else the fewest chunks (each at
// least kMinChunkRows rows) whose grid fills >= 95% of its last wave of resident slots.
int64_t choose_chunks(int64_t col_blocks, int64_t rows, int64_t slots) {
  if (KF_SPLIT_ROWS > 0) return std::min<int64_t>({KF_SPLIT_ROWS, rows, 65535});
  if (slots <= 0) return 1;
  const int64_t most = std::clamp<int64_t>(rows / kMinChunkRows, 1, 65535);
  int64_t best = 1;
  double best_fill = 0.0;
  for (int64_t k = 1; k <= most; ++k) {
    const int64_t blocks = col_blocks * k;
    const double fill = static_cast<double>(blocks) / (((blocks + slots - 1) / slots) * slots);
    if (fill >= 0.95) return k;
    if (fill > best_fill + 1e-9) best = k, best_fill = fill;
  }
  return best;
}

template <int V>
int launch(const float* a, const float* x, float* y, int64_t rows, int64_t cols,
           cudaStream_t stream) {
  const int64_t col_blocks = (cols + int64_t{kColThreads} * V - 1) / (int64_t{kColThreads} * V);
  if (col_blocks > 0x7fffffff) return -2;
  int64_t chunks = choose_chunks(col_blocks, rows, resident_slots<V>());
  if (!KF_ATOMIC_COMBINE) chunks = std::max<int64_t>(1, std::min(chunks, kMaxPartials / cols));
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk_rows - 1) / chunk_rows;  // no empty chunk
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  if (chunks == 1) {
    gemv_t_tile<V, Combine::store>
        <<<grid, kThreads, 0, stream>>>(a, x, y, rows, cols, chunk_rows);
  } else if (KF_ATOMIC_COMBINE) {
    const cudaError_t zeroed = cudaMemsetAsync(y, 0, cols * sizeof(float), stream);
    if (zeroed != cudaSuccess) return static_cast<int>(zeroed);
    gemv_t_tile<V, Combine::atomic>
        <<<grid, kThreads, 0, stream>>>(a, x, y, rows, cols, chunk_rows);
  } else {
    gemv_t_tile<V, Combine::workspace>
        <<<grid, kThreads, 0, stream>>>(a, x, y, rows, cols, chunk_rows);
    const int64_t sum_blocks = std::min<int64_t>((cols + 255) / 256, 65535);
    gemv_t_sum_partials<<<static_cast<unsigned>(sum_blocks), 256, 0, stream>>>(
        y, cols, static_cast<int>(chunks));
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Inputs A [rows, cols], x [rows]; output y [cols].
// Error codes: -1 wrong tensor count, -2 wrong rank or shape (or more than 2^31 column blocks),
// -3 wrong dtype, -4 non-compact strides, otherwise the cudaError_t of the memset or launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != rows || y.shape[0] != cols) return -2;
  if (!is_f32(a) || !is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(a) || !is_compact(x) || !is_compact(y)) return -4;
  if (cols == 0) return 0;

  const float* ap = data_of<const float>(a);
  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  if (rows == 0) {  // empty sums
    return static_cast<int>(cudaMemsetAsync(yp, 0, cols * sizeof(float), stream));
  }
  const bool vec = KF_VEC > 1 && cols % KF_VEC == 0 && aligned(ap, KF_VEC * 4);
  return vec ? launch<KF_VEC>(ap, xp, yp, rows, cols, stream)
             : launch<1>(ap, xp, yp, rows, cols, stream);
}

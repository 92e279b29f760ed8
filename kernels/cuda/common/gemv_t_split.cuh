// The host side and the row-chunk combination shared by the transposed matrix-vector kernels
// (kernels/cuda/gemv_t: column_per_thread and tile_transpose), y = A^T x with A row-major
// [rows, cols], x [rows], y [cols]. A kernel's grid is (column blocks) x (row chunks); the chunks'
// partial sums of a column reach y in one of three ways (Combine):
//   store      one chunk: the block stores y directly (no memset, no atomics, no second pass);
//   atomic     atomicAdd into y, zeroed first by cudaMemsetAsync on the stream (summation order
//              across chunks not deterministic);
//   workspace  a static device workspace [chunks, cols] and a second kernel that adds each
//              column's partials in chunk order (deterministic); the chunk count is capped so
//              that the workspace holds them.
// The chunk count is `split_rows` when set, else the fewest chunks (each at least kMinChunkRows
// rows) whose grid fills >= 95% of the last wave of the device's resident-block slots. The
// workspace makes concurrent calls on two streams unsafe (one worker runs one call at a time).
#pragma once

#include <cuda/common/elem.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kf::gemv_t {

// A chunk shorter than this adds a cols-long partial (atomics or workspace) for too few rows:
// at 32 rows the combine traffic is ~3% of A's.
constexpr int64_t kMinChunkRows = 32;
// Workspace of partial sums for the workspace combine: 16 MiB of static device memory.
constexpr int64_t kMaxPartials = int64_t{1} << 22;

__device__ float g_partials[kMaxPartials];

/// How a block's partial sums reach y (see the top of the file).
enum class Combine { store, atomic, workspace };

/// Register cap for __launch_bounds__: blocks of `threads` threads per SM (65536 registers) when
/// a thread needs `registers`, clamped to [1, 32] (an SM holds at most 32 blocks).
constexpr int min_blocks(int registers, int threads) {
  const int raw = 65536 / (registers * threads);
  return raw < 1 ? 1 : (raw > 32 ? 32 : raw);
}

/// V floats at p (aligned to 4 * V bytes) through the read-only path.
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

/// Column c's partial sum s of row chunk blockIdx.y, delivered as C says.
template <Combine C>
__device__ __forceinline__ void emit(float* y, int64_t cols, int64_t c, float s) {
  if constexpr (C == Combine::atomic) {
    atomicAdd(y + c, s);
  } else if constexpr (C == Combine::workspace) {
    g_partials[blockIdx.y * cols + c] = s;
  } else {
    y[c] = s;
  }
}

/// y[c] = sum over chunks j in order of g_partials[j * cols + c]. Grid-stride over columns.
__global__ void sum_partials(float* __restrict__ y, int64_t cols, int chunks) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < chunks; ++j) s += g_partials[j * cols + c];
    y[c] = s;
  }
}

/// Resident-block slots of the current device for `kernel` at `threads` threads (SMs * blocks
/// per SM), cached per (device, kernel); 0 if the query fails.
template <typename Kernel>
int64_t resident_slots(Kernel kernel, int threads) {
  static int cached_device = -1;
  static const void* cached_kernel = nullptr;
  static int64_t cached_slots = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  const void* key = reinterpret_cast<const void*>(kernel);
  if (device == cached_device && key == cached_kernel) return cached_slots;
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess) {
    return 0;
  }
  cached_device = device;
  cached_kernel = key;
  cached_slots = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  return cached_slots;
}

/// Row chunks for col_blocks column blocks (see the top of the file).
inline int64_t choose_chunks(int64_t col_blocks, int64_t rows, int64_t slots, int split_rows) {
  if (split_rows > 0) return std::min<int64_t>({split_rows, rows, 65535});
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

template <Combine C>
using CombineTag = std::integral_constant<Combine, C>;

/// Launches y = A^T x: `kernel_for(CombineTag<C>{})` is the kernel for combine C (signature
/// (a, x, y, rows, cols, chunk_rows)), run on (ceil(cols / cols_per_block), chunks) blocks of
/// `threads` threads. Returns -2 for more than 2^31 column blocks, else a cudaError_t.
template <typename KernelFor>
int launch(const float* a, const float* x, float* y, int64_t rows, int64_t cols,
           int64_t cols_per_block, int threads, int split_rows, bool atomic_combine,
           cudaStream_t stream, KernelFor kernel_for) {
  const int64_t col_blocks = (cols + cols_per_block - 1) / cols_per_block;
  if (col_blocks > 0x7fffffff) return -2;
  int64_t chunks = choose_chunks(col_blocks, rows,
                                 resident_slots(kernel_for(CombineTag<Combine::atomic>{}), threads),
                                 split_rows);
  if (!atomic_combine) chunks = std::max<int64_t>(1, std::min(chunks, kMaxPartials / cols));
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk_rows - 1) / chunk_rows;  // no empty chunk
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  if (chunks == 1) {
    kernel_for(CombineTag<Combine::store>{})<<<grid, threads, 0, stream>>>(a, x, y, rows, cols,
                                                                           chunk_rows);
  } else if (atomic_combine) {
    const cudaError_t zeroed = cudaMemsetAsync(y, 0, cols * sizeof(float), stream);
    if (zeroed != cudaSuccess) return static_cast<int>(zeroed);
    kernel_for(CombineTag<Combine::atomic>{})<<<grid, threads, 0, stream>>>(a, x, y, rows, cols,
                                                                            chunk_rows);
  } else {
    kernel_for(CombineTag<Combine::workspace>{})<<<grid, threads, 0, stream>>>(a, x, y, rows,
                                                                               cols, chunk_rows);
    const int64_t sum_blocks = std::min<int64_t>((cols + 255) / 256, 65535);
    sum_partials<<<static_cast<unsigned>(sum_blocks), 256, 0, stream>>>(
        y, cols, static_cast<int>(chunks));
  }
  return static_cast<int>(cudaGetLastError());
}

/// The kernels' entry point (kforge_run): inputs A [rows, cols] and x [rows], output y [cols],
/// all f32 and compact. `launch_v(std::integral_constant<int, V>{}, a, x, y, rows, cols)` runs
/// the V-column instantiation: VEC when cols % VEC == 0 and A is VEC-float aligned, else 1.
/// Returns 0, -1 (wrong tensor count), -2 (wrong rank or shape, or more than 2^31 column
/// blocks), -3 (wrong dtype), -4 (non-compact strides) or the cudaError_t of the memset or
/// launch.
template <int VEC, typename LaunchV>
int run(const kforge_args* args, LaunchV launch_v) {
  if (args->num_inputs != 2 || args->num_outputs != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& x = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (a.ndim != 2 || x.ndim != 1 || y.ndim != 1) return -2;
  const int64_t rows = a.shape[0], cols = a.shape[1];
  if (x.shape[0] != rows || y.shape[0] != cols) return -2;
  if (!kf::is_f32(a) || !kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(a) || !kf::is_compact(x) || !kf::is_compact(y)) return -4;
  if (cols == 0) return 0;

  const float* ap = kf::data_of<const float>(a);
  const float* xp = kf::data_of<const float>(x);
  float* yp = kf::data_of<float>(y);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  if (rows == 0) {  // empty sums
    return static_cast<int>(cudaMemsetAsync(yp, 0, cols * sizeof(float), stream));
  }
  const bool vec = VEC > 1 && cols % VEC == 0 && kf::aligned(ap, VEC * 4);
  return vec ? launch_v(std::integral_constant<int, VEC>{}, ap, xp, yp, rows, cols, stream)
             : launch_v(std::integral_constant<int, 1>{}, ap, xp, yp, rows, cols, stream);
}

}  // namespace kf::gemv_t

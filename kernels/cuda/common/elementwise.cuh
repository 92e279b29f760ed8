// The element-wise unary kernels shared by kforge's built-in CUDA families (kernels/cuda/relu,
// gelu, silu): y[i] = op(x[i]) over a compact tensor of any shape, x and y of the compiled element
// type (KF_DTYPE, see elem.cuh), op computed in fp32. A family's variant file is its activation
// functor plus one call:
//
//   #include <cuda/common/elementwise.cuh>
//   struct Relu { __device__ float operator()(float v) const { return v < 0.0f ? 0.0f : v; } };
//   KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_grid_stride<Relu>(args); }
//
// Two decompositions, which only differ in who loops:
//   run_grid_stride         about one wave of blocks (SMs x the blocks one SM holds at once)
//                           loops over the tensor;
//   run_thread_per_element  no loop: the grid covers the tensor, blocks retire and the hardware
//                           schedules new ones (millions of short blocks at large sizes).
// Each step a thread loads UNROLL vectors of VEC elements, blockDim apart (coalesced), before
// storing any, so UNROLL * VEC * kElemBytes bytes per thread are in flight (VEC = 8 halves or 4
// floats is one 16-byte access; 8 floats is two).
// Vector accesses only when both pointers are VEC * kElemBytes aligned; the last count % VEC
// elements go through block 0's scalar tail. Misaligned pointers run the scalar (VEC = 1)
// instantiation. NaN propagates through whatever the functor does with it.
//
// Compile-time knobs (-DKF_<NAME>=<value>, family.toml lists their values): BLOCK_THREADS, VEC,
// UNROLL; KF_DTYPE picks the element type.
//
// Error codes of the entry points: -1 wrong tensor/scalar count, -2 shapes differ (or, for
// thread_per_element, more blocks than grid.x allows), -3 wrong dtype, -4 non-compact strides,
// otherwise the cudaError_t of the launch.
#pragma once

#include <cuda/common/elem.cuh>

#include <algorithm>
#include <cstdint>
#include <cstring>

#ifndef KF_BLOCK_THREADS
#define KF_BLOCK_THREADS 256
#endif
#ifndef KF_VEC
#define KF_VEC 4
#endif
#ifndef KF_UNROLL
#define KF_UNROLL 2
#endif

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS is a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4 || KF_VEC == 8,
              "VEC must be 1, 2, 4 or 8");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace kf {
namespace elementwise_detail {

constexpr int kThreads = KF_BLOCK_THREADS;

/// Loads V elements at p (aligned to V * kElemBytes) through the read-only data cache (__ldg on
/// an integer vector of the same bytes), into fp32 registers.
template <int V>
__device__ __forceinline__ void load_readonly(const kf_elem* __restrict__ p, float (&v)[V]) {
  constexpr int kBytes = V * kElemBytes;
  Pack<V> pack;
  if constexpr (kBytes == 32) {
    const uint4 lo = __ldg(reinterpret_cast<const uint4*>(p));
    const uint4 hi = __ldg(reinterpret_cast<const uint4*>(p) + 1);
    memcpy(&pack, &lo, 16);
    memcpy(reinterpret_cast<char*>(&pack) + 16, &hi, 16);
  } else if constexpr (kBytes == 16) {
    const uint4 bits = __ldg(reinterpret_cast<const uint4*>(p));
    memcpy(&pack, &bits, 16);
  } else if constexpr (kBytes == 8) {
    const uint2 bits = __ldg(reinterpret_cast<const uint2*>(p));
    memcpy(&pack, &bits, 8);
  } else if constexpr (kBytes == 4) {
    const unsigned int bits = __ldg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&pack, &bits, 4);
  } else {
    static_assert(kBytes == 2, "one half or bfloat16");
    const unsigned short bits = __ldg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&pack, &bits, 2);
  }
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = to_float(pack.e[k]);
}

/// The last count % V elements (fewer than V <= 8 < blockDim), by block 0.
template <typename Op, int V>
__device__ __forceinline__ void apply_tail(const kf_elem* __restrict__ x, kf_elem* __restrict__ y,
                                           int64_t count) {
  const int64_t vectors = count / V;
  const int64_t tail = count - vectors * V;
  if (blockIdx.x == 0 && threadIdx.x < tail) {
    const int64_t i = vectors * V + threadIdx.x;
    y[i] = from_float(Op{}(to_float(x[i])));
  }
}

// Both kernels load a thread's UNROLL vectors of V elements, blockDim apart, before storing any.
// The body is written out in each rather than shared through an inlined function: nvcc gives the
// grid-stride loop 38 registers instead of 32 that way (sm_90, gelu, VEC 4, UNROLL 2), which
// costs a quarter of the occupancy at 256 threads.
template <typename Op, int V>
__global__ void __launch_bounds__(kThreads)
grid_stride_kernel(const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t count) {
  constexpr int U = KF_UNROLL;
  const int64_t vectors = count / V;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * U;
  const Op op{};
#pragma unroll 1
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * U + threadIdx.x;
       base < vectors; base += step) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * kThreads;
      if (i < vectors) load_readonly<V>(x + i * V, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * kThreads;
#pragma unroll
      for (int j = 0; j < V; ++j) v[u][j] = op(v[u][j]);
      if (i < vectors) store_vec<V>(y + i * V, v[u]);
    }
  }
  apply_tail<Op, V>(x, y, count);
}

template <typename Op, int V>
__global__ void __launch_bounds__(kThreads)
per_thread_kernel(const kf_elem* __restrict__ x, kf_elem* __restrict__ y, int64_t count) {
  constexpr int U = KF_UNROLL;
  const Op op{};
  const int64_t vectors = count / V;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * U + threadIdx.x;
  float v[U][V];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * kThreads;
    if (i < vectors) load_readonly<V>(x + i * V, v[u]);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * kThreads;
#pragma unroll
    for (int j = 0; j < V; ++j) v[u][j] = op(v[u][j]);
    if (i < vectors) store_vec<V>(y + i * V, v[u]);
  }
  apply_tail<Op, V>(x, y, count);
}

/// One wave of `kernel`: as many blocks as every SM holds at once, from the occupancy calculator
/// (registers decide: at 256 threads, 32 registers per thread fit 2048 threads per SM on sm_90,
/// 40 only 1536, so a fixed SMs x 2048 / BLOCK_THREADS would launch a second, partial wave).
template <typename Kernel>
int64_t wave_blocks(Kernel kernel) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0) != cudaSuccess) {
    sms = 132;  // H200; an error here resurfaces at the launch
    per_sm = 2048 / kThreads;
  }
  return static_cast<int64_t>(sms) * std::max(per_sm, 1);
}

/// Blocks that cover `count` elements with UNROLL vectors of V per thread.
template <int V>
int64_t covering_blocks(int64_t count) {
  const int64_t per_block = static_cast<int64_t>(kThreads) * KF_UNROLL;
  return (count / V + per_block - 1) / per_block;
}

template <typename Op, int V>
int launch_grid_stride(const kf_elem* x, kf_elem* y, int64_t count, cudaStream_t stream) {
  static const int64_t wave = wave_blocks(grid_stride_kernel<Op, V>);
  const int64_t blocks = std::max<int64_t>(1, std::min(covering_blocks<V>(count), wave));
  grid_stride_kernel<Op, V><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, y, count);
  return static_cast<int>(cudaGetLastError());
}

template <typename Op, int V>
int launch_per_thread(const kf_elem* x, kf_elem* y, int64_t count, cudaStream_t stream) {
  const int64_t needed = covering_blocks<V>(count);
  if (needed > 0x7fffffff) return -2;  // grid.x limit
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, needed));
  per_thread_kernel<Op, V><<<grid, kThreads, 0, stream>>>(x, y, count);
  return static_cast<int>(cudaGetLastError());
}

inline bool same_shape(const DLTensor& a, const DLTensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

/// The argument checks both entry points share: 0 when x and y are usable, else the error code.
inline int check_unary(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (!same_shape(x, y)) return -2;
  if (!is_elem(x) || !is_elem(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  return 0;
}

/// True when VEC-element accesses are possible at both pointers.
inline bool vector_ok(const void* x, const void* y) {
  constexpr int kBytes = KF_VEC * kElemBytes;
  return KF_VEC > 1 && aligned(x, kBytes) && aligned(y, kBytes);
}

}  // namespace elementwise_detail

/// kforge_run body of the grid_stride variant: y = Op()(x) element-wise, about one wave of
/// blocks looping over the tensor. Op is default-constructible with
/// `__device__ float operator()(float) const`. Returns 0 or an error code (see the file comment).
template <typename Op>
int run_grid_stride(const kforge_args* args) {
  namespace d = elementwise_detail;
  if (const int error = d::check_unary(args)) return error;
  const int64_t count = element_count(args->inputs[0]);
  if (count == 0) return 0;
  const kf_elem* x = data_of<const kf_elem>(args->inputs[0]);
  kf_elem* y = data_of<kf_elem>(args->outputs[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  return d::vector_ok(x, y) ? d::launch_grid_stride<Op, KF_VEC>(x, y, count, stream)
                            : d::launch_grid_stride<Op, 1>(x, y, count, stream);
}

/// kforge_run body of the thread_per_element variant: y = Op()(x) element-wise, a grid that
/// covers the tensor with no loop. Same contract as run_grid_stride; -2 also when the grid would
/// exceed grid.x's limit.
template <typename Op>
int run_thread_per_element(const kforge_args* args) {
  namespace d = elementwise_detail;
  if (const int error = d::check_unary(args)) return error;
  const int64_t count = element_count(args->inputs[0]);
  if (count == 0) return 0;
  const kf_elem* x = data_of<const kf_elem>(args->inputs[0]);
  kf_elem* y = data_of<kf_elem>(args->outputs[0]);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  return d::vector_ok(x, y) ? d::launch_per_thread<Op, KF_VEC>(x, y, count, stream)
                            : d::launch_per_thread<Op, 1>(x, y, count, stream);
}

}  // namespace kf

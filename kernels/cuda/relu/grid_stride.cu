// ReLU, grid-stride: y[i] = x[i] < 0 ? 0 : x[i] over a compact fp32 tensor of any shape (NaN
// propagates, as in torch.relu). About one wave of blocks (SMs x 2048 / BLOCK_THREADS) loops over
// the tensor; each step a thread loads UNROLL vectors of VEC floats, blockDim apart (coalesced),
// before storing any, so UNROLL * VEC * 4 bytes per thread are in flight.
// Vector loads only when both pointers are VEC*4-byte aligned; the last size % VEC elements go
// through block 0's scalar tail. Misaligned pointers run the scalar instantiation.
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

static_assert(KF_BLOCK_THREADS % 32 == 0 && KF_BLOCK_THREADS >= 32 && KF_BLOCK_THREADS <= 1024,
              "BLOCK_THREADS is a multiple of 32 in [32, 1024]");
static_assert(KF_VEC == 1 || KF_VEC == 2 || KF_VEC == 4, "VEC must be 1, 2 or 4");
static_assert(KF_UNROLL >= 1 && KF_UNROLL <= 8, "UNROLL in [1, 8]");

namespace {

constexpr int kThreads = KF_BLOCK_THREADS;

// The activation; the only line that differs between the element-wise families.
__device__ __forceinline__ float activation(float v) { return v < 0.0f ? 0.0f : v; }

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

int64_t element_count(const DLTensor& t) {
  int64_t count = 1;
  for (int i = 0; i < t.ndim; ++i) count *= t.shape[i];
  return count;
}

bool same_shape(const DLTensor& a, const DLTensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
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
__global__ void __launch_bounds__(kThreads)
elementwise_grid_stride(const float* __restrict__ x, float* __restrict__ y, int64_t count) {
  constexpr int U = KF_UNROLL;
  const int64_t vectors = count / V;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * U;
#pragma unroll 1
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * U + threadIdx.x;
       base < vectors; base += step) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * kThreads;
      if (i < vectors) load_vec<V>(x + i * V, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * kThreads;
#pragma unroll
      for (int j = 0; j < V; ++j) v[u][j] = activation(v[u][j]);
      if (i < vectors) store_vec<V>(y + i * V, v[u]);
    }
  }
  const int64_t tail = count - vectors * V;  // < V
  if (blockIdx.x == 0 && threadIdx.x < tail) {
    const int64_t i = vectors * V + threadIdx.x;
    y[i] = activation(x[i]);
  }
}

// One wave: as many blocks as every SM holds at full occupancy (2048 threads per SM on sm_90).
int64_t wave_blocks() {
  static const int64_t blocks = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      sms = 132;  // H200; an error here resurfaces at the launch
    return static_cast<int64_t>(sms) * (2048 / kThreads);
  }();
  return blocks;
}

template <int V>
int launch(const float* x, float* y, int64_t count, cudaStream_t stream) {
  const int64_t needed = (count / V + kThreads * KF_UNROLL - 1) / (kThreads * KF_UNROLL);
  const int64_t blocks = std::max<int64_t>(1, std::min(needed, wave_blocks()));
  const unsigned grid = static_cast<unsigned>(blocks);
  elementwise_grid_stride<V><<<grid, kThreads, 0, stream>>>(x, y, count);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 shapes differ, -3 wrong dtype,
// -4 non-compact strides, otherwise the cudaError_t of the launch.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (!same_shape(x, y)) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  const int64_t count = element_count(x);
  if (count == 0) return 0;

  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
  constexpr int bytes = KF_VEC * 4;
  const bool vec = KF_VEC > 1 && aligned(xp, bytes) && aligned(yp, bytes);
  return vec ? launch<KF_VEC>(xp, yp, count, stream) : launch<1>(xp, yp, count, stream);
}

// Helpers shared by kforge's built-in CUDA kernels (kernels/cuda/*): the element type a kernel
// is compiled for, conversions to and from the fp32 it computes in, vector loads and stores of
// VEC elements, and the DLTensor checks every entry point repeats (the type-independent ones are
// kernels/common/dltensor.h's, included here). Kernel authors outside kforge do not need it;
// <kforge/kernel.h> stays the only required header.
//
// Element type: the templates generator defines KF_DTYPE from the task's first input
// (family.toml lists each variant's `dtypes`):
//   KF_DTYPE_F32  (0, the default)  float
//   KF_DTYPE_F16  (1)               __half          (IEEE binary16)
//   KF_DTYPE_BF16 (2)               __nv_bfloat16   (bfloat16)
// Kernels load kf_elem, compute in float (kf::to_float / kf::from_float, round to nearest even)
// and store kf_elem, so fp16/bf16 inputs get fp32 accumulation as the issue asks.
#pragma once

#include <common/dltensor.h>  // is_f32, is_compact, data_of, element_count
#include <kforge/kernel.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#define KF_DTYPE_F32 0
#define KF_DTYPE_F16 1
#define KF_DTYPE_BF16 2
#ifndef KF_DTYPE
#define KF_DTYPE KF_DTYPE_F32
#endif

#if KF_DTYPE == KF_DTYPE_F32
typedef float kf_elem;
#elif KF_DTYPE == KF_DTYPE_F16
typedef __half kf_elem;
#elif KF_DTYPE == KF_DTYPE_BF16
typedef __nv_bfloat16 kf_elem;
#else
#error "KF_DTYPE must be KF_DTYPE_F32, KF_DTYPE_F16 or KF_DTYPE_BF16"
#endif

namespace kf {

/// Bytes of one element of the compiled type (4 or 2).
constexpr int kElemBytes = static_cast<int>(sizeof(kf_elem));

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/// fp32 -> the compiled element type, round to nearest even.
__device__ __forceinline__ kf_elem from_float(float v) {
#if KF_DTYPE == KF_DTYPE_F32
  return v;
#elif KF_DTYPE == KF_DTYPE_F16
  return __float2half_rn(v);
#else
  return __float2bfloat16_rn(v);
#endif
}

/// V adjacent elements moved as one aligned access (V * kElemBytes bytes: 16 B for 4 floats or
/// 8 halves). The pointer must be aligned to that size (see aligned()).
template <int V>
struct alignas(V * sizeof(kf_elem)) Pack {
  kf_elem e[V];
};

/// Loads V elements at p (aligned to V * kElemBytes) into fp32 registers.
template <int V>
__device__ __forceinline__ void load_vec(const kf_elem* p, float (&v)[V]) {
  const Pack<V> pack = *reinterpret_cast<const Pack<V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = to_float(pack.e[k]);
}

/// Stores V fp32 values at p (aligned to V * kElemBytes) in the element type.
template <int V>
__device__ __forceinline__ void store_vec(kf_elem* p, const float (&v)[V]) {
  Pack<V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.e[k] = from_float(v[k]);
  *reinterpret_cast<Pack<V>*>(p) = pack;
}

/// True when `t` holds the compiled element type (one lane).
inline bool is_elem(const DLTensor& t) {
#if KF_DTYPE == KF_DTYPE_F32
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
#elif KF_DTYPE == KF_DTYPE_F16
  return t.dtype.code == kDLFloat && t.dtype.bits == 16 && t.dtype.lanes == 1;
#else
  return t.dtype.code == kDLBfloat && t.dtype.bits == 16 && t.dtype.lanes == 1;
#endif
}

/// True when p is a multiple of `bytes` (vector loads need V * kElemBytes alignment).
inline bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

}  // namespace kf

// DLTensor checks that every built-in kernel's entry point makes, for both backends (host code,
// plain C++; the cuda helpers of kernels/cuda/common/elem.cuh build on it). Kernel authors
// outside kforge do not need it: <kforge/kernel.h> stays the only required header.
//
//   #include <common/dltensor.h>
//   if (!kf::is_f32(x)) return -3;
//   if (!kf::is_compact(x)) return -4;
//   const float* xp = kf::data_of<const float>(x);
#pragma once

#include <kforge/kernel.h>

#include <cstdint>

namespace kf {

/// True when `t` is fp32 with one lane.
inline bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

/// True for compact row-major strides (or none given, which DLPack defines as compact);
/// size-1 dimensions may have any stride.
inline bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

/// The tensor's first element (data + byte_offset) as T*.
template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

/// Number of elements (product of the shape; 1 for a 0-d tensor).
inline int64_t element_count(const DLTensor& t) {
  int64_t count = 1;
  for (int i = 0; i < t.ndim; ++i) count *= t.shape[i];
  return count;
}

}  // namespace kf

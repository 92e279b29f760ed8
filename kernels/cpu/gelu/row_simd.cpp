// GELU (cpu, erf form): y[i] = 0.5 x[i] (1 + erf(x[i] / sqrt(2))) over a compact fp32 tensor of any
// shape (torch.nn.functional.gelu, approximate='none'). One flat `omp simd` loop; PARALLEL = 1
// splits it into equal contiguous ranges over the OpenMP threads (`parallel for simd`, static
// schedule), so each core streams its own range. Element-wise: the "row" is the whole flattened
// tensor.
#include <kforge/kernel.h>

#include <omp.h>

#include <cmath>
#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");

namespace {

// The activation; the only line that differs between the element-wise families.
// The exact (erf) GELU of torch.nn.functional.gelu's default. std::erf is a libm call that GCC
// does not vectorize without -ffast-math, so the loop is SIMD in name only; threads still help.
inline float activation(float v) {
  return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
}

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

}  // namespace

// Error codes: -1 wrong tensor/scalar count, -2 shapes differ, -3 wrong dtype,
// -4 non-compact strides.
KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (!same_shape(x, y)) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  const int64_t count = element_count(x);

  const float* __restrict__ xp = data_of<const float>(x);
  float* __restrict__ yp = data_of<float>(y);
#if KF_PARALLEL
#pragma omp parallel for simd schedule(static)
#else
#pragma omp simd
#endif
  for (int64_t i = 0; i < count; ++i) yp[i] = activation(xp[i]);
  return 0;
}

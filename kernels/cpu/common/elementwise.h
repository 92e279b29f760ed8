// The element-wise unary kernel shared by kforge's built-in cpu families (kernels/cpu/relu, gelu,
// silu): y[i] = op(x[i]) over a compact fp32 tensor of any shape. One flat `omp simd` loop;
// PARALLEL = 1 splits it into equal contiguous ranges over the OpenMP threads (`parallel for simd`,
// static schedule), so each core streams its own range. Element-wise: the "row" is the whole
// flattened tensor. A family's variant file is its activation functor plus one call:
//
//   #include <cpu/common/elementwise.h>
//   struct Relu { float operator()(float v) const { return v < 0.0f ? 0.0f : v; } };
//   KFORGE_API int kforge_run(const kforge_args* args) { return kf::run_row_simd<Relu>(args); }
//
// Compile-time knob (-DKF_PARALLEL=0|1). Built with g++ -O3 -march=native -fopenmp (no
// -ffast-math), so only functors without libm calls vectorize.
//
// Error codes: -1 wrong tensor/scalar count, -2 shapes differ, -3 wrong dtype, -4 non-compact
// strides.
#pragma once

#include <common/dltensor.h>
#include <cpu/common/vmath.h>
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_PARALLEL
#define KF_PARALLEL 1
#endif

static_assert(KF_PARALLEL == 0 || KF_PARALLEL == 1, "PARALLEL is 0 or 1");

namespace kf {
namespace elementwise_detail {

inline bool same_shape(const DLTensor& a, const DLTensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

}  // namespace elementwise_detail

/// kforge_run body of the row_simd variant: y = Op()(x) element-wise over fp32 tensors. Op is
/// default-constructible with `float operator()(float) const`. Returns 0 or an error code (see
/// the file comment).
template <typename Op>
int run_row_simd(const kforge_args* args) {
  namespace d = elementwise_detail;
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (!d::same_shape(x, y)) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;
  const int64_t count = element_count(x);

  const float* __restrict__ xp = data_of<const float>(x);
  float* __restrict__ yp = data_of<float>(y);
  const Op op{};
#if KF_PARALLEL
#pragma omp parallel for simd schedule(static)
#else
#pragma omp simd
#endif
  for (int64_t i = 0; i < count; ++i) yp[i] = op(xp[i]);
  return 0;
}

}  // namespace kf

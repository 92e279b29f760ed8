// The fp32 dot product of kforge's built-in cpu kernels that take one per output (gemm_epilogue's
// row_dot, attention's two_pass_rows): A interleaved partial sums, a[i] * b[i] added to partial
// i % A in an `omp simd` loop (so the A sums vectorize without -ffast-math and keep A FMA chains
// in flight), the tail into partial 0, then the partials in order. fp32 products and sums.
#pragma once

#include <cstdint>

namespace kf {

/// sum over i < n of a[i] * b[i], with A (1..16) interleaved accumulators.
template <int A>
inline __attribute__((always_inline)) float interleaved_dot(const float* __restrict__ a,
                                                            const float* __restrict__ b,
                                                            int64_t n) {
  float partial[A] = {};
  int64_t i = 0;
  for (; i + A <= n; i += A) {
#pragma omp simd
    for (int j = 0; j < A; ++j) partial[j] += a[i + j] * b[i + j];
  }
  for (; i < n; ++i) partial[0] += a[i] * b[i];
  float sum = 0.0f;
  for (int j = 0; j < A; ++j) sum += partial[j];
  return sum;
}

}  // namespace kf

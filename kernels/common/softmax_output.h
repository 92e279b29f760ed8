// The output functors of the row softmax kernels, the one line in which the `softmax` and
// `log_softmax` families differ. Every decomposition (kernels/cuda/common/softmax_rows/*.cuh,
// kernels/cpu/common/softmax_rows/*.h) reduces a row x to m = max(x) and
// s = sum(exp(x - m)) and then writes y through one of these; a family's variant file is one
// call with its functor:
//
//   #include <cuda/common/softmax_rows/warp_per_row.cuh>
//   KFORGE_API int kforge_run(const kforge_args* args) {
//     return kf::softmax_rows::warp_per_row::run<kf::SoftmaxOutput>(args);
//   }
//
// A functor says what y is made of, and the kernel computes it with its own exponential
// (__expf on cuda, std::exp or kf::exp_vectorizable on cpu):
//   kFromExp = true    y = from_exp(exp(x - m), c): the kernel may keep exp(x - m) from its sum
//                      pass (in y or in a staged row) instead of computing it again;
//   kFromExp = false   y = from_shifted(x - m, c): no exponential in the write pass;
// with c = row_constant(s), computed once per row. Plain C++ with fp32 arithmetic in the order
// the kernels had before they shared it, so that both backends compile the same code.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define KF_SOFTMAX_OUTPUT_FN __host__ __device__ __forceinline__
#else
#define KF_SOFTMAX_OUTPUT_FN inline
#endif

namespace kf {

/// Softmax: y = exp(x - m) / s, as exp(x - m) * (1 / s). Has no from_shifted.
struct SoftmaxOutput {
  static constexpr bool kFromExp = true;
  KF_SOFTMAX_OUTPUT_FN static float row_constant(float sum) { return 1.0f / sum; }
  KF_SOFTMAX_OUTPUT_FN static float from_exp(float e, float inv_sum) { return e * inv_sum; }
};

/// Log-softmax: y = (x - m) - log(s), in that order: x - m is exact near the max, so an output
/// near 0 keeps its relative accuracy even when |m| is large, which x - (m + log s) would not.
/// The log is the accurate logf, once per row. Has no from_exp.
struct LogSoftmaxOutput {
  static constexpr bool kFromExp = false;
  KF_SOFTMAX_OUTPUT_FN static float row_constant(float sum) { return logf(sum); }
  KF_SOFTMAX_OUTPUT_FN static float from_shifted(float shifted, float log_sum) {
    return shifted - log_sum;
  }
};

}  // namespace kf

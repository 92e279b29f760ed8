// The argument checks of the gemm_epilogue family, Y = epilogue(X W^T + b), shared by its cuda
// variants (host code, plain C++).
//
//   inputs   x [M, K], weight [N, K], and optionally bias [N]   (fp32, compact row-major;
//            x and weight are both K-contiguous: an "NT" GEMM)
//   outputs  y [M, N]                                           (fp32, compact row-major)
//
// Error codes, as every built-in kernel returns them: -1 wrong tensor count, -2 wrong rank or
// shape, -3 wrong dtype, -4 non-compact strides (scalar counts are load_scalars' business).
#pragma once

#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <cstdint>

namespace kf {

/// The operands of one call, checked.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* x = nullptr;     // [m, k]
  const float* w = nullptr;     // [n, k]
  const float* bias = nullptr;  // [n], or nullptr when the task has no bias
  float* y = nullptr;           // [m, n]
};

/// Checks args (2 or 3 inputs, one output) and fills `out`; returns 0 or the error code above.
inline int check_gemm_args(const kforge_args* args, GemmArgs& out) {
  if ((args->num_inputs != 2 && args->num_inputs != 3) || args->num_outputs != 1) return -1;
  const bool has_bias = args->num_inputs == 3;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 2 || y.ndim != 2) return -2;
  if (has_bias && args->inputs[2].ndim != 1) return -2;
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  if (w.shape[1] != k || y.shape[0] != m || y.shape[1] != n) return -2;
  if (has_bias && args->inputs[2].shape[0] != n) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (has_bias && !is_f32(args->inputs[2])) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  if (has_bias && !is_compact(args->inputs[2])) return -4;
  out.m = m;
  out.n = n;
  out.k = k;
  out.x = data_of<const float>(x);
  out.w = data_of<const float>(w);
  out.bias = has_bias ? data_of<const float>(args->inputs[2]) : nullptr;
  out.y = data_of<float>(y);
  return 0;
}

}  // namespace kf

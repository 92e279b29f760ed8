// The argument checks and views every gemm_epilogue entry point makes (host C++, both backends):
// inputs x [M, K], weight [N, K] and optionally bias [N]; output y [M, N]; fp32, compact; the
// epilogue's scalars and channel tensors ([N] each, the last inputs; common/epilogue.h).
//
//   kf::GemmArgs g;
//   if (int code = kf::gemm_args(args, g); code != 0) return code;
#pragma once

#include <common/dltensor.h>
#include <common/epilogue.h>
#include <kforge/kernel.h>

#include <cstdint>

namespace kf {

struct GemmArgs {
  const float* x = nullptr;     // [m, k]
  const float* w = nullptr;     // [n, k]
  const float* bias = nullptr;  // [n], or null without a bias input
  float* y = nullptr;           // [m, n]
  int64_t m = 0, n = 0, k = 0;
  ep::Operands operands;  // the epilogue's scalars and channel tensors
};

/// Fills `g` from `args`. Returns 0, or -1 wrong tensor or scalar count, -2 wrong rank or shape,
/// -3 wrong dtype, -4 non-compact strides.
inline int gemm_args(const kforge_args* args, GemmArgs& g) {
  const int tensors = args->num_inputs - ep::kChannelTensors;  // x, weight[, bias]
  if (tensors != 2 && tensors != 3) return -1;
  if (args->num_outputs != 1) return -1;
  if (!ep::load_scalars(args, g.operands)) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  const bool has_bias = tensors == 3;
  if (x.ndim != 2 || w.ndim != 2 || y.ndim != 2) return -2;
  g.m = x.shape[0];
  g.k = x.shape[1];
  g.n = w.shape[0];
  if (w.shape[1] != g.k || y.shape[0] != g.m || y.shape[1] != g.n) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  if (has_bias) {
    const DLTensor& b = args->inputs[2];
    if (b.ndim != 1 || b.shape[0] != g.n) return -2;
    if (!is_f32(b)) return -3;
    if (!is_compact(b)) return -4;
    g.bias = data_of<const float>(b);
  }
  if (const int code = ep::load_channel_tensors(args, g.operands, g.n); code != 0) return code;
  g.x = data_of<const float>(x);
  g.w = data_of<const float>(w);
  g.y = data_of<float>(y);
  return 0;
}

}  // namespace kf

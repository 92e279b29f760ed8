// What every cpu row softmax decomposition (kernels/cpu/common/softmax_rows/*.h) shares: the
// entry point's argument checks. The kernels take one fp32 input x [rows, cols] and one fp32
// output y of the same shape, and write y through an output functor
// (kernels/common/softmax_output.h: kf::SoftmaxOutput or kf::LogSoftmaxOutput), each in its own
// loops as `if constexpr (Output::kFromExp)` branches (a helper that took the exponential as a
// lambda changed GCC's code for the loops' scalar tails).
#pragma once

#include <common/dltensor.h>
#include <common/softmax_output.h>
#include <kforge/kernel.h>

#include <cstdint>

namespace kf::softmax_rows {

// Internal linkage, as when this code sat in each kernel's own file (one translation unit
// includes it): GCC then inlines what is called once exactly as it did there, so the machine
// code stays the one that was measured.
namespace {

/// Checks the arguments of a row softmax entry point: one fp32 input x [rows, cols] and one fp32
/// output y of the same shape. Returns 0, or the entry point's error code: -1 wrong tensor count,
/// -2 wrong rank or shape, -3 wrong dtype, -4 non-compact strides. (The caller reads x and y
/// itself, after it: that keeps GCC's code for the entry point the one the kernels had before
/// they shared this.)
inline int check_rows(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_f32(x) || !kf::is_f32(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  return 0;
}

}  // namespace
}  // namespace kf::softmax_rows

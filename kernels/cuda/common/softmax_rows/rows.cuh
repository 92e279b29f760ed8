// What every row softmax decomposition (kernels/cuda/common/softmax_rows/*.cuh) shares on the
// host: the entry point's argument checks and the choice of the vector path. The kernels take
// one input x [rows, cols] and one output y of the same shape, both of the compiled element type
// (KF_DTYPE, kernels/cuda/common/elem.cuh), and write y through an output functor
// (kernels/common/softmax_output.h: kf::SoftmaxOutput or kf::LogSoftmaxOutput).
#pragma once

#include <common/softmax_output.h>
#include <cuda/common/elem.cuh>

#include <cstdint>

namespace kf::softmax_rows {

/// The tensors of one call, as the kernels take them.
struct Rows {
  const kf_elem* x = nullptr;
  kf_elem* y = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  cudaStream_t stream = nullptr;
};

/// Checks the arguments of a row softmax entry point and fills `out`. Returns 0, or the entry
/// point's error code: -1 wrong tensor count, -2 wrong rank or shape, -3 a dtype other than the
/// compiled element type (x and y alike), -4 non-compact strides.
inline int read_rows(const kforge_args* args, Rows& out) {
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!kf::is_elem(x) || !kf::is_elem(y)) return -3;
  if (!kf::is_compact(x) || !kf::is_compact(y)) return -4;
  out.x = kf::data_of<const kf_elem>(x);
  out.y = kf::data_of<kf_elem>(y);
  out.rows = rows;
  out.cols = cols;
  out.stream = static_cast<cudaStream_t>(args->stream);
  return 0;
}

/// y of one element x, given the row max m and c = Output::row_constant(s): from __expf(x - m)
/// (softmax) or from x - m (log-softmax).
template <class Output>
__device__ __forceinline__ float output(float x, float m, float c) {
  if constexpr (Output::kFromExp) {
    return Output::from_exp(__expf(x - m), c);
  } else {
    return Output::from_shifted(x - m, c);
  }
}

/// True when the VEC-element instantiation may run: VEC > 1, VEC divides cols (so every row
/// start is aligned when the base pointers are) and both pointers are VEC-element aligned.
/// Otherwise the scalar (VEC = 1) instantiation runs.
template <int VEC>
bool vector_path(const Rows& call) {
  constexpr int bytes = VEC * kf::kElemBytes;
  return VEC > 1 && call.cols % VEC == 0 && kf::aligned(call.x, bytes) &&
         kf::aligned(call.y, bytes);
}

}  // namespace kf::softmax_rows

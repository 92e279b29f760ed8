// The argument checks and views every attention entry point makes (host C++, both backends):
// inputs q, k, v [b, s, d] and output o [b, s, d], fp32, compact, no scalars (the scale
// 1/sqrt(d) is part of the operator; examples/attention/task.toml).
//
//   kf::AttentionArgs a;
//   if (int code = kf::attention_args(args, a); code != 0) return code;
#pragma once

#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <cstdint>

namespace kf {

struct AttentionArgs {
  const float* q = nullptr;  // [b, s, d]
  const float* k = nullptr;  // [b, s, d]
  const float* v = nullptr;  // [b, s, d]
  float* o = nullptr;        // [b, s, d]
  int64_t b = 0, s = 0, d = 0;
};

/// Fills `a` from `args`. Returns 0, or -1 wrong tensor or scalar count, -2 wrong rank or shape,
/// -3 wrong dtype, -4 non-compact strides.
inline int attention_args(const kforge_args* args, AttentionArgs& a) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor* tensors[4] = {&args->inputs[0], &args->inputs[1], &args->inputs[2],
                                &args->outputs[0]};
  for (const DLTensor* t : tensors) {
    if (t->ndim != 3) return -2;
    for (int i = 0; i < 3; ++i) {
      if (t->shape[i] != tensors[0]->shape[i]) return -2;
    }
  }
  for (const DLTensor* t : tensors) {
    if (!is_f32(*t)) return -3;
  }
  for (const DLTensor* t : tensors) {
    if (!is_compact(*t)) return -4;
  }
  a.b = tensors[0]->shape[0];
  a.s = tensors[0]->shape[1];
  a.d = tensors[0]->shape[2];
  a.q = data_of<const float>(*tensors[0]);
  a.k = data_of<const float>(*tensors[1]);
  a.v = data_of<const float>(*tensors[2]);
  a.o = data_of<float>(*tensors[3]);
  return 0;
}

}  // namespace kf

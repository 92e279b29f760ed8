// Reference SiLU (cpu), as torch.nn.functional.silu: y[i] = x[i] / (1 + exp(-x[i])), i.e.
// x * sigmoid(x). Trusted and plain: one single-threaded loop in double precision (exp(-x)
// overflows double only below x = -709, where x / inf = -0 is the right fp32 answer anyway).
// Error codes: -1 wrong tensor/scalar count, -2 shapes differ, -3 wrong dtype,
// -4 non-compact strides.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

namespace {

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

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != y.ndim) return -2;
  int64_t count = 1;
  for (int i = 0; i < x.ndim; ++i) {
    if (x.shape[i] != y.shape[i]) return -2;
    count *= x.shape[i];
  }
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;

  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  for (int64_t i = 0; i < count; ++i) {
    const double v = xp[i];
    yp[i] = static_cast<float>(v / (1.0 + std::exp(-v)));
  }
  return 0;
}

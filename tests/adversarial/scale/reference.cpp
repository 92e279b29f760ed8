// Reference scale (cpu): y[i] = alpha * x[i], in double, rounded once to fp32.
// Trusted and plain: single-threaded.
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#include <kforge/kernel.h>

#include <cstdint>

namespace {

bool is_f32(const DLTensor& t) {
  return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
}

template <typename T>
T* data_of(const DLTensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if ((x.strides && x.strides[0] != 1) || (y.strides && y.strides[0] != 1)) return -4;

  const int64_t n = x.shape[0];
  const double alpha = args->scalars[0];
  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  for (int64_t i = 0; i < n; ++i) yp[i] = static_cast<float>(alpha * static_cast<double>(xp[i]));
  return 0;
}

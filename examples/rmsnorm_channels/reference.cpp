// Reference RMSNorm over channels (cpu): y[n, c, s] = x[n, c, s] / sqrt(mean_c(x[n, :, s]^2) + eps)
// for x viewed as [N, C, S]. Trusted and plain: single-threaded, one (n, s) at a time walking
// the C channels S floats apart, the sum of squares accumulated in double.
// Error codes: -1 wrong tensor/scalar count, -2 wrong rank or shape, -3 wrong dtype,
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
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 3 || y.ndim != 3) return -2;
  const int64_t n = x.shape[0], c = x.shape[1], s = x.shape[2];
  if (y.shape[0] != n || y.shape[1] != c || y.shape[2] != s) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;

  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  const double eps = args->scalars[0];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      const int64_t base = i * c * s + j;
      double ss = 0.0;
      for (int64_t k = 0; k < c; ++k) {
        ss += static_cast<double>(xp[base + k * s]) * xp[base + k * s];
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
      for (int64_t k = 0; k < c; ++k)
        yp[base + k * s] = static_cast<float>(static_cast<double>(xp[base + k * s]) * inv);
    }
  }
  return 0;
}

// Adversarial (wrong_eps): the reference with eps ten times too large.
// RMSNorm (cpu): y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// Trusted and plain: single-threaded, the sum of squares accumulated in double.
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
  if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 1 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (w.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  float* yp = data_of<float>(y);
  const double eps = 10.0 * args->scalars[0];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    double ss = 0.0;
    for (int64_t c = 0; c < cols; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = static_cast<float>(static_cast<double>(xr[c]) * inv * wp[c]);
  }
  return 0;
}

// Reference log-softmax (cpu) over the last dimension (torch.log_softmax(x, dim=1)):
//   y[r, c] = x[r, c] - m - log(sum_c exp(x[r, c] - m)),  m = max_c x[r, :].
// Trusted and plain: single-threaded, exponentials, their sum and the log in double.
// Error codes: -1 wrong tensor count, -2 wrong rank or shape, -3 wrong dtype,
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
  if (args->num_inputs != 1 || args->num_outputs != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || y.ndim != 2) return -2;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != rows || y.shape[1] != cols) return -2;
  if (!is_f32(x) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(y)) return -4;

  const float* xp = data_of<const float>(x);
  float* yp = data_of<float>(y);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    float* yr = yp + r * cols;
    double m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, static_cast<double>(xr[c]));
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(xr[c]) - m);
    const double log_sum = std::log(sum);
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = static_cast<float>(static_cast<double>(xr[c]) - m - log_sum);
  }
  return 0;
}

// Reference of gemm_relu_div (cpu): y[m, n] = relu(sum_k x[m, k] * weight[n, k] + bias[n]) / divisor.
// Trusted and plain: single-threaded; each dot product accumulated in KF_ACC (double by default,
// rounded to float once, so the result is the float64 answer). Built with -DKF_ACC=float it is
// the task's fp32 model: the same loop at fp32 (products and sums rounded to float), the error an
// ordinary fp32 computation makes ([fp32_model] in task.toml).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#include <kforge/kernel.h>

#include <cstdint>

#ifndef KF_ACC
#define KF_ACC double
#endif

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
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& b = args->inputs[2];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 2 || w.ndim != 2 || b.ndim != 1 || y.ndim != 2) return -2;
  const int64_t m_size = x.shape[0], k_size = x.shape[1], n_size = w.shape[0];
  if (w.shape[1] != k_size || b.shape[0] != n_size || y.shape[0] != m_size ||
      y.shape[1] != n_size) {
    return -2;
  }
  if (!is_f32(x) || !is_f32(w) || !is_f32(b) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(b) || !is_compact(y)) return -4;
  const float divisor = static_cast<float>(args->scalars[0]);

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  const float* bp = data_of<const float>(b);
  float* yp = data_of<float>(y);
  for (int64_t m = 0; m < m_size; ++m) {
    for (int64_t n = 0; n < n_size; ++n) {
      KF_ACC sum = 0;
      for (int64_t k = 0; k < k_size; ++k) {
        sum += static_cast<KF_ACC>(xp[m * k_size + k]) * static_cast<KF_ACC>(wp[n * k_size + k]);
      }
      float v = static_cast<float>(sum + static_cast<KF_ACC>(bp[n]));
      v = v < 0.0f ? 0.0f : v;  // relu, NaN kept
      yp[m * n_size + n] = v / divisor;
    }
  }
  return 0;
}

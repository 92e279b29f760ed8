// Reference of attention (cpu): o[b, i, :] = sum_j p[b, i, j] v[b, j, :] with
// p[b, i, :] = softmax_j(q[b, i, :] . k[b, j, :] / sqrt(d)), the max subtracted before exp.
// Trusted and plain: single-threaded, one query row at a time; scores, the softmax and the
// weighted sum all in KF_ACC (double by default, rounded to float once at the store, so the
// result is the float64 answer). Built with -DKF_ACC=float it is the task's fp32 model: the same
// loops at fp32, the error an ordinary fp32 computation makes ([fp32_model] in task.toml).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides.
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <vector>

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

bool same_shape(const DLTensor& a, const DLTensor& b) {
  return a.shape[0] == b.shape[0] && a.shape[1] == b.shape[1] && a.shape[2] == b.shape[2];
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 3 || args->num_outputs != 1 || args->num_scalars != 0) return -1;
  const DLTensor& q = args->inputs[0];
  const DLTensor& k = args->inputs[1];
  const DLTensor& v = args->inputs[2];
  const DLTensor& o = args->outputs[0];
  if (q.ndim != 3 || k.ndim != 3 || v.ndim != 3 || o.ndim != 3) return -2;
  if (!same_shape(q, k) || !same_shape(q, v) || !same_shape(q, o)) return -2;
  if (!is_f32(q) || !is_f32(k) || !is_f32(v) || !is_f32(o)) return -3;
  if (!is_compact(q) || !is_compact(k) || !is_compact(v) || !is_compact(o)) return -4;
  const int64_t b_size = q.shape[0], s_size = q.shape[1], d_size = q.shape[2];
  const KF_ACC scale = KF_ACC(1) / std::sqrt(static_cast<KF_ACC>(d_size));

  const float* qp = data_of<const float>(q);
  const float* kp = data_of<const float>(k);
  const float* vp = data_of<const float>(v);
  float* op = data_of<float>(o);
  std::vector<KF_ACC> p(static_cast<size_t>(s_size));
  std::vector<KF_ACC> out(static_cast<size_t>(d_size));
  for (int64_t b = 0; b < b_size; ++b) {
    const float* kb = kp + b * s_size * d_size;
    const float* vb = vp + b * s_size * d_size;
    for (int64_t i = 0; i < s_size; ++i) {
      const float* qi = qp + (b * s_size + i) * d_size;
      KF_ACC row_max = -INFINITY;
      for (int64_t j = 0; j < s_size; ++j) {
        KF_ACC dot = 0;
        for (int64_t c = 0; c < d_size; ++c) {
          dot += static_cast<KF_ACC>(qi[c]) * static_cast<KF_ACC>(kb[j * d_size + c]);
        }
        p[j] = dot * scale;
        row_max = p[j] > row_max ? p[j] : row_max;
      }
      KF_ACC sum = 0;
      for (int64_t j = 0; j < s_size; ++j) {
        p[j] = std::exp(p[j] - row_max);
        sum += p[j];
      }
      for (int64_t c = 0; c < d_size; ++c) out[c] = 0;
      for (int64_t j = 0; j < s_size; ++j) {
        const KF_ACC w = p[j] / sum;
        for (int64_t c = 0; c < d_size; ++c) out[c] += w * static_cast<KF_ACC>(vb[j * d_size + c]);
      }
      float* oi = op + (b * s_size + i) * d_size;
      for (int64_t c = 0; c < d_size; ++c) oi[c] = static_cast<float>(out[c]);
    }
  }
  return 0;
}

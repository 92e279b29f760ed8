// Reference of conv3d_bias_relu (cpu): a grouped, strided, padded, dilated 3-D convolution
// (torch.nn.Conv3d, padding_mode zeros) with a bias, then ReLU, then a per-channel shift, written
// from its definition:
//   s[n, co, o] = bias[co] + sum over ci < cig and taps k (per dimension d, h, w) with
//                 i = o * stride - padding + k * dilation in [0, in):
//                 x[n, g * cig + ci, i] * weight[co, ci, k]          (g = co / cog)
//   y[n, co, o] = max(s, 0) + shift[co]
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, shift [co] optional (the
// chain, ReLU then + shift, is applied only when shift is given: inputs x, weight, bias, shift),
// y [n, co, od, oh, ow], groups = c / cig = co / cog; scalars stride_d/h/w, padding_d/h/w,
// dilation_d/h/w, groups. With inputs x and weight only it is the plain convolution of the
// KernelBench level 1 bench tasks.
// Trusted and plain: single-threaded, independent of kernels/common; each output accumulated in
// KF_ACC (double by default) and the chain applied in KF_ACC, rounded to float once: the float64
// answer. Built with -DKF_ACC=float it is the task's fp32 model ([fp32_model] in task.toml).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape (y's extents included),
// -3 wrong dtype, -4 non-compact strides, -5 a geometry scalar out of range.
#include <kforge/kernel.h>

#include <cmath>
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

// A [co] vector input (bias or shift), or null when absent; false when malformed.
bool channel_vector(const DLTensor* t, int64_t co) {
  return t == nullptr || (t->ndim == 1 && t->shape[0] == co && is_f32(*t) && is_compact(*t));
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs < 2 || args->num_inputs > 4 || args->num_outputs != 1 ||
      args->num_scalars != 10) {
    return -1;
  }
  int64_t g[10];
  for (int i = 0; i < 10; ++i) {
    const double v = args->scalars[i];
    if (v != std::floor(v) || v < 0 || v > (1 << 20)) return -5;
    g[i] = static_cast<int64_t>(v);
  }
  const int64_t groups = g[9];
  for (int i = 0; i < 3; ++i) {
    if (g[i] < 1 || g[6 + i] < 1) return -5;
  }
  if (groups < 1) return -5;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  const DLTensor* b = args->num_inputs >= 3 ? &args->inputs[2] : nullptr;
  const DLTensor* shift = args->num_inputs == 4 ? &args->inputs[3] : nullptr;
  if (x.ndim != 5 || w.ndim != 5 || y.ndim != 5) return -2;
  const int64_t n_size = x.shape[0], c_size = x.shape[1], co_size = w.shape[0];
  const int64_t cig = w.shape[1];
  if (co_size % groups != 0 || c_size != groups * cig || y.shape[0] != n_size ||
      y.shape[1] != co_size) {
    return -2;
  }
  const int64_t cog = co_size / groups;
  const int64_t* in = x.shape + 2;
  const int64_t* out = y.shape + 2;
  const int64_t* k = w.shape + 2;
  for (int i = 0; i < 3; ++i) {
    const int64_t span = in[i] + 2 * g[3 + i] - g[6 + i] * (k[i] - 1) - 1;
    if (span < 0 || out[i] != span / g[i] + 1) return -2;
  }
  if (!channel_vector(b, co_size) || !channel_vector(shift, co_size)) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  const float* bp = b ? data_of<const float>(*b) : nullptr;
  const float* sp = shift ? data_of<const float>(*shift) : nullptr;
  float* yp = data_of<float>(y);
  const int64_t in_volume = in[0] * in[1] * in[2], taps = k[0] * k[1] * k[2];
  int64_t index = 0;
  for (int64_t n = 0; n < n_size; ++n) {
    for (int64_t co = 0; co < co_size; ++co) {
      const int64_t group = co / cog;
      for (int64_t od = 0; od < out[0]; ++od) {
        for (int64_t oh = 0; oh < out[1]; ++oh) {
          for (int64_t ow = 0; ow < out[2]; ++ow, ++index) {
            KF_ACC sum = 0;
            for (int64_t ci = 0; ci < cig; ++ci) {
              const int64_t xc = (n * c_size + group * cig + ci) * in_volume;
              for (int64_t kd = 0; kd < k[0]; ++kd) {
                const int64_t id = od * g[0] - g[3] + kd * g[6];
                if (id < 0 || id >= in[0]) continue;
                for (int64_t kh = 0; kh < k[1]; ++kh) {
                  const int64_t ih = oh * g[1] - g[4] + kh * g[7];
                  if (ih < 0 || ih >= in[1]) continue;
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t iw = ow * g[2] - g[5] + kw * g[8];
                    if (iw < 0 || iw >= in[2]) continue;
                    const int64_t xi = xc + (id * in[1] + ih) * in[2] + iw;
                    const int64_t wi = (co * cig + ci) * taps + (kd * k[1] + kh) * k[2] + kw;
                    sum += static_cast<KF_ACC>(xp[xi]) * static_cast<KF_ACC>(wp[wi]);
                  }
                }
              }
            }
            if (bp) sum += static_cast<KF_ACC>(bp[co]);
            if (sp) sum = (sum < 0 ? KF_ACC{0} : sum) + static_cast<KF_ACC>(sp[co]);
            yp[index] = static_cast<float>(sum);
          }
        }
      }
    }
  }
  return 0;
}

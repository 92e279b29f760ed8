// Reference of conv_transpose3d (cpu): a grouped, strided, padded, dilated 3-D transposed
// convolution (torch.nn.ConvTranspose3d), written from its definition as a gather:
//   y[n, co, o] = bias[co] + sum over ci in co's group and taps k, where
//                 i = (o + padding - k * dilation) / stride is an integer in [0, in):
//                 x[n, ci, i] * weight[ci, co % cog, k]          (per dimension d, h, w)
// x [n, c, d, h, w], weight [c, cog, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow],
// groups = c / cig = co / cog; scalars stride_d/h/w, padding_d/h/w, dilation_d/h/w, groups.
// Trusted and plain: single-threaded, independent of kernels/common; each output accumulated in
// KF_ACC (double by default, rounded to float once: the float64 answer). Built with
// -DKF_ACC=float it is the task's fp32 model ([fp32_model] in task.toml).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, -5 a geometry scalar out of range.
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

// The input index that tap k of output o reads, or -1 when none (not on the stride grid, or
// outside the input).
int64_t source(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t in) {
  const int64_t num = o + pad - k * dil;
  if (num < 0 || num % stride != 0) return -1;
  const int64_t i = num / stride;
  return i < in ? i : -1;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs < 2 || args->num_inputs > 3 || args->num_outputs != 1 ||
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
  const DLTensor* b = args->num_inputs == 3 ? &args->inputs[2] : nullptr;
  if (x.ndim != 5 || w.ndim != 5 || y.ndim != 5 || (b && b->ndim != 1)) return -2;
  const int64_t n_size = x.shape[0], c_size = x.shape[1], cog = w.shape[1];
  const int64_t co_size = groups * cog;
  if (w.shape[0] != c_size || c_size % groups != 0 || y.shape[0] != n_size ||
      y.shape[1] != co_size || (b && b->shape[0] != co_size)) {
    return -2;
  }
  const int64_t cig = c_size / groups;
  const int64_t* in = x.shape + 2;
  const int64_t* out = y.shape + 2;
  const int64_t* k = w.shape + 2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y) || (b && !is_f32(*b))) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y) || (b && !is_compact(*b))) return -4;

  const float* xp = data_of<const float>(x);
  const float* wp = data_of<const float>(w);
  const float* bp = b ? data_of<const float>(*b) : nullptr;
  float* yp = data_of<float>(y);
  const int64_t in_volume = in[0] * in[1] * in[2], taps = k[0] * k[1] * k[2];
  int64_t index = 0;
  for (int64_t n = 0; n < n_size; ++n) {
    for (int64_t co = 0; co < co_size; ++co) {
      const int64_t group = co / cog, j = co % cog;
      for (int64_t od = 0; od < out[0]; ++od) {
        for (int64_t oh = 0; oh < out[1]; ++oh) {
          for (int64_t ow = 0; ow < out[2]; ++ow, ++index) {
            KF_ACC sum = 0;
            for (int64_t ci = group * cig; ci < (group + 1) * cig; ++ci) {
              for (int64_t kd = 0; kd < k[0]; ++kd) {
                const int64_t id = source(od, kd, g[0], g[3], g[6], in[0]);
                if (id < 0) continue;
                for (int64_t kh = 0; kh < k[1]; ++kh) {
                  const int64_t ih = source(oh, kh, g[1], g[4], g[7], in[1]);
                  if (ih < 0) continue;
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t iw = source(ow, kw, g[2], g[5], g[8], in[2]);
                    if (iw < 0) continue;
                    const int64_t xi = (n * c_size + ci) * in_volume + (id * in[1] + ih) * in[2];
                    const int64_t wi = (ci * cog + j) * taps + (kd * k[1] + kh) * k[2];
                    sum += static_cast<KF_ACC>(xp[xi + iw]) * static_cast<KF_ACC>(wp[wi + kw]);
                  }
                }
              }
            }
            if (bp) sum += static_cast<KF_ACC>(bp[co]);
            yp[index] = static_cast<float>(sum);
          }
        }
      }
    }
  }
  return 0;
}

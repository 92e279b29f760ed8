// Reference of conv3d_bias_relu (cuda), the twin of reference.cpp: a grouped, strided, padded,
// dilated 3-D convolution (torch.nn.Conv3d, padding_mode zeros) with a bias, then ReLU, then a
// per-channel shift, written from its definition, one thread per output element (grid-stride),
// accumulated in KF_ACC (double by default) with the chain applied in KF_ACC, rounded to float
// once. Built with -DKF_ACC=float it is the task's fp32 model.
//   y[n, co, o] = max(bias[co] + sum over ci < cig, taps k with i = o * stride - padding +
//                 k * dilation in [0, in): x[n, g * cig + ci, i] * weight[co, ci, k], 0)
//                 + shift[co]                                          (g = co / cog)
// x [n, c, d, h, w], weight [co, cig, kd, kh, kw], bias [co] optional, shift [co] optional (the
// chain is applied only when shift is given: inputs x, weight, bias, shift), y [n, co, od, oh,
// ow]; scalars stride_d/h/w, padding_d/h/w, dilation_d/h/w, groups. With inputs x and weight
// only it is the plain convolution (the KernelBench level 1 bench tasks use it so).
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape (y's extents included),
// -3 wrong dtype, -4 non-compact strides, -5 a geometry scalar out of range, otherwise the
// launch's cudaError_t.
#include <cuda_runtime.h>
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

/// Sizes and geometry, passed by value.
struct Geometry {
  int64_t n, c, co, cig, cog;
  int64_t in[3], out[3], k[3], stride[3], pad[3], dil[3];
};

__global__ void conv3d_bias_relu(const float* x, const float* w, const float* b, const float* shift,
                                 float* y, Geometry g) {
  const int64_t out_volume = g.out[0] * g.out[1] * g.out[2];
  const int64_t in_volume = g.in[0] * g.in[1] * g.in[2];
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  const int64_t total = g.n * g.co * out_volume;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = index % g.out[2];
    const int64_t oh = index / g.out[2] % g.out[1];
    const int64_t od = index / (g.out[2] * g.out[1]) % g.out[0];
    const int64_t co = index / out_volume % g.co;
    const int64_t n = index / (out_volume * g.co);
    const int64_t group = co / g.cog;
    KF_ACC sum = 0;
    for (int64_t ci = 0; ci < g.cig; ++ci) {
      const int64_t xc = (n * g.c + group * g.cig + ci) * in_volume;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
        if (id < 0 || id >= g.in[0]) continue;
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
          if (ih < 0 || ih >= g.in[1]) continue;
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
            if (iw < 0 || iw >= g.in[2]) continue;
            const float xv = x[xc + (id * g.in[1] + ih) * g.in[2] + iw];
            const float wv = w[(co * g.cig + ci) * taps + (kd * g.k[1] + kh) * g.k[2] + kw];
            sum += static_cast<KF_ACC>(xv) * static_cast<KF_ACC>(wv);
          }
        }
      }
    }
    if (b) sum += static_cast<KF_ACC>(b[co]);
    if (shift) sum = (sum < 0 ? KF_ACC{0} : sum) + static_cast<KF_ACC>(shift[co]);
    y[index] = static_cast<float>(sum);
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs < 2 || args->num_inputs > 4 || args->num_outputs != 1 ||
      args->num_scalars != 10) {
    return -1;
  }
  int64_t s[10];
  for (int i = 0; i < 10; ++i) {
    const double v = args->scalars[i];
    if (v != std::floor(v) || v < 0 || v > (1 << 20)) return -5;
    s[i] = static_cast<int64_t>(v);
  }
  Geometry g{};
  for (int i = 0; i < 3; ++i) {
    g.stride[i] = s[i];
    g.pad[i] = s[3 + i];
    g.dil[i] = s[6 + i];
    if (g.stride[i] < 1 || g.dil[i] < 1) return -5;
  }
  const int64_t groups = s[9];
  if (groups < 1) return -5;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  const DLTensor* b = args->num_inputs >= 3 ? &args->inputs[2] : nullptr;
  const DLTensor* shift = args->num_inputs == 4 ? &args->inputs[3] : nullptr;
  if (x.ndim != 5 || w.ndim != 5 || y.ndim != 5) return -2;
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.co = w.shape[0];
  g.cig = w.shape[1];
  if (g.co % groups != 0 || g.c != groups * g.cig || y.shape[0] != g.n || y.shape[1] != g.co) {
    return -2;
  }
  g.cog = g.co / groups;
  for (int i = 0; i < 3; ++i) {
    g.in[i] = x.shape[2 + i];
    g.out[i] = y.shape[2 + i];
    g.k[i] = w.shape[2 + i];
    const int64_t span = g.in[i] + 2 * g.pad[i] - g.dil[i] * (g.k[i] - 1) - 1;
    if (span < 0 || g.out[i] != span / g.stride[i] + 1) return -2;
  }
  if (!channel_vector(b, g.co) || !channel_vector(shift, g.co)) return -2;
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  const int64_t total = g.n * g.co * g.out[0] * g.out[1] * g.out[2];
  if (total == 0) return 0;
  constexpr int kBlock = 256;
  const int64_t blocks = (total + kBlock - 1) / kBlock;
  const unsigned grid = static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
  conv3d_bias_relu<<<grid, kBlock, 0, static_cast<cudaStream_t>(args->stream)>>>(
      data_of<const float>(x), data_of<const float>(w), b ? data_of<const float>(*b) : nullptr,
      shift ? data_of<const float>(*shift) : nullptr, data_of<float>(y), g);
  return static_cast<int>(cudaGetLastError());
}

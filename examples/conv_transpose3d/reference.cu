// Reference of conv_transpose3d (cuda), the twin of reference.cpp: a grouped, strided, padded,
// dilated 3-D transposed convolution (torch.nn.ConvTranspose3d) written from its definition as a
// gather, one thread per output element (grid-stride), accumulated in KF_ACC (double by default,
// rounded to float once). Built with -DKF_ACC=float it is the task's fp32 model.
// x [n, c, d, h, w], weight [c, cog, kd, kh, kw], bias [co] optional, y [n, co, od, oh, ow];
// scalars stride_d/h/w, padding_d/h/w, dilation_d/h/w, groups.
// Error codes: -1 wrong tensor or scalar count, -2 wrong rank or shape, -3 wrong dtype,
// -4 non-compact strides, -5 a geometry scalar out of range, otherwise the launch's cudaError_t.
#include <kforge/kernel.h>

#include <cuda_runtime.h>

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

/// Sizes and geometry, passed by value.
struct Geometry {
  int64_t n, c, co, cig, cog;
  int64_t in[3], out[3], k[3], stride[3], pad[3], dil[3];
};

// The input index that tap k of output o reads, or -1 when none.
__device__ int64_t source(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dil,
                          int64_t in) {
  const int64_t num = o + pad - k * dil;
  if (num < 0 || num % stride != 0) return -1;
  const int64_t i = num / stride;
  return i < in ? i : -1;
}

__global__ void conv_transpose3d(const float* x, const float* w, const float* b, float* y,
                                 Geometry g) {
  const int64_t out_volume = g.out[0] * g.out[1] * g.out[2];
  const int64_t in_volume = g.in[0] * g.in[1] * g.in[2];
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  const int64_t total = g.n * g.co * out_volume;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < total; index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = index % g.out[2];
    const int64_t oh = index / g.out[2] % g.out[1];
    const int64_t od = index / (g.out[2] * g.out[1]) % g.out[0];
    const int64_t co = index / out_volume % g.co;
    const int64_t n = index / (out_volume * g.co);
    const int64_t group = co / g.cog, j = co % g.cog;
    KF_ACC sum = 0;
    for (int64_t ci = group * g.cig; ci < (group + 1) * g.cig; ++ci) {
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const int64_t id = source(od, kd, g.stride[0], g.pad[0], g.dil[0], g.in[0]);
        if (id < 0) continue;
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const int64_t ih = source(oh, kh, g.stride[1], g.pad[1], g.dil[1], g.in[1]);
          if (ih < 0) continue;
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t iw = source(ow, kw, g.stride[2], g.pad[2], g.dil[2], g.in[2]);
            if (iw < 0) continue;
            const float xv = x[(n * g.c + ci) * in_volume + (id * g.in[1] + ih) * g.in[2] + iw];
            const float wv = w[(ci * g.cog + j) * taps + (kd * g.k[1] + kh) * g.k[2] + kw];
            sum += static_cast<KF_ACC>(xv) * static_cast<KF_ACC>(wv);
          }
        }
      }
    }
    if (b) sum += static_cast<KF_ACC>(b[co]);
    y[index] = static_cast<float>(sum);
  }
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs < 2 || args->num_inputs > 3 || args->num_outputs != 1 ||
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
  const DLTensor* b = args->num_inputs == 3 ? &args->inputs[2] : nullptr;
  if (x.ndim != 5 || w.ndim != 5 || y.ndim != 5 || (b && b->ndim != 1)) return -2;
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.cog = w.shape[1];
  g.co = groups * g.cog;
  if (w.shape[0] != g.c || g.c % groups != 0 || y.shape[0] != g.n || y.shape[1] != g.co ||
      (b && b->shape[0] != g.co)) {
    return -2;
  }
  g.cig = g.c / groups;
  for (int i = 0; i < 3; ++i) {
    g.in[i] = x.shape[2 + i];
    g.out[i] = y.shape[2 + i];
    g.k[i] = w.shape[2 + i];
  }
  if (!is_f32(x) || !is_f32(w) || !is_f32(y) || (b && !is_f32(*b))) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y) || (b && !is_compact(*b))) return -4;
  const int64_t total = g.n * g.co * g.out[0] * g.out[1] * g.out[2];
  if (total == 0) return 0;
  constexpr int kBlock = 256;
  const int64_t blocks = (total + kBlock - 1) / kBlock;
  const unsigned grid = static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
  conv_transpose3d<<<grid, kBlock, 0, static_cast<cudaStream_t>(args->stream)>>>(
      data_of<const float>(x), data_of<const float>(w), b ? data_of<const float>(*b) : nullptr,
      data_of<float>(y), g);
  return static_cast<int>(cudaGetLastError());
}

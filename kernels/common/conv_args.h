// The argument checks every grouped_conv and grouped_conv_transpose entry point makes (host C++,
// both backends), and the geometry the formulations share.
//
// Both take, after x, weight and an optional bias [co]:
//   scalars: stride_d, stride_h, stride_w, padding_d, padding_h, padding_w,
//            dilation_d, dilation_h, dilation_w, groups   (in that order, integers), then the
//            epilogue chain's scalars, if any (common/epilogue.h: KF_EPILOGUE applied to each
//            output as it is stored; its op indices count the geometry scalars too)
//   the chain's channel tensors ([co] each), if any, as the last inputs
// A 2-D convolution is the 3-D one with depth 1, a 1-D one with depth and height 1.
//
// Forward convolution (PyTorch's nn.Conv3d, padding_mode zeros), conv_forward_args:
//   x      [n, c, d, h, w]            c = groups * cig in channels
//   weight [co, cig, kd, kh, kw]      co = groups * cog out channels
//   y      [n, co, od, oh, ow]
//   y[n, co, o] = bias[co] + sum over ci < cig, taps k (per dimension, g = co / cog):
//                 x[n, g * cig + ci, o * stride - padding + k * dilation] * weight[co, ci, k]
//   (terms whose input index falls outside [0, in) are zero), and per dimension
//   od = floor((d + 2 * padding - dilation * (k - 1) - 1) / stride) + 1 (checked).
//
// Transposed convolution (PyTorch's ConvTranspose3d), conv_transpose_args:
//   x      [n, c, d, h, w]            c = groups * cig in channels
//   weight [c, cog, kd, kh, kw]       cog out channels per group, co = groups * cog
//   y      [n, co, od, oh, ow]
// Input element x[n, ci, i] reaches output o = i * stride - padding + k * dilation (per
// dimension) through tap k, multiplied by weight[ci, co % cog, k], where co is in ci's group:
//   y[n, co, o] = bias[co] + sum over ci of co's group, taps k with
//                 i = (o + padding - k * dilation) / stride an integer in [0, d):
//                 x[n, ci, i] * weight[ci, co - g * cog, k]
// (the adjoint of a strided convolution; Dumoulin & Visin 2016, "A guide to convolution
// arithmetic", section 4). The output's size is the caller's (output_padding only lengthens it):
// od = (d - 1) * stride - 2 * padding + dilation * (kd - 1) + output_padding + 1.
//
//   kf::ConvArgs c;
//   if (int code = kf::conv_forward_args(args, c); code != 0) return code;
#pragma once

#include <common/dltensor.h>
#include <common/epilogue.h>
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define KF_CONV_HD __host__ __device__ __forceinline__
#else
#define KF_CONV_HD inline
#endif

namespace kf {

/// One spatial dimension of the geometry: input and output extents, kernel taps, stride,
/// padding, dilation.
struct ConvDim {
  int64_t in = 0, out = 0;
  int k = 0, stride = 1, pad = 0, dil = 1;
};

struct ConvArgs {
  const float* x = nullptr;     // [n, c, d, h, w]
  const float* w = nullptr;     // [co, cig, kd, kh, kw] (forward) or [c, cog, kd, kh, kw]
  const float* bias = nullptr;  // [co], or null without a bias input
  float* y = nullptr;           // [n, co, od, oh, ow]
  int64_t n = 0, c = 0, co = 0;
  int groups = 1, cig = 0, cog = 0;  // channels per group, in and out
  ConvDim dim[3];                    // depth, height, width
  ep::Operands operands;             // every task scalar as float, the channel tensors
  KF_CONV_HD int64_t in_volume() const { return dim[0].in * dim[1].in * dim[2].in; }
  KF_CONV_HD int64_t out_volume() const { return dim[0].out * dim[1].out * dim[2].out; }
  KF_CONV_HD int taps() const { return dim[0].k * dim[1].k * dim[2].k; }
};

constexpr int kConvScalars = 10;

namespace conv_detail {

/// The checks both formulations share before the weight is read: tensor and scalar counts, the
/// ten geometry scalars (into c.dim[i].stride/pad/dil and c.groups), the epilogue's scalars, and
/// the ranks. Returns 0 or an error code of conv_transpose_args.
inline int read_geometry(const kforge_args* args, ConvArgs& c) {
  const int tensors = args->num_inputs - ep::kChannelTensors;  // x, weight[, bias]
  if (tensors != 2 && tensors != 3) return -1;
  if (args->num_outputs != 1 || args->num_scalars < kConvScalars) return -1;
  if (!ep::load_scalars(args, c.operands)) return -1;
  int geometry[kConvScalars];
  for (int i = 0; i < kConvScalars; ++i) {
    const double v = args->scalars[i];
    if (!(v == std::floor(v)) || v < 0 || v > 1 << 20) return -5;
    geometry[i] = static_cast<int>(v);
  }
  for (int i = 0; i < 3; ++i) {
    c.dim[i].stride = geometry[i];
    c.dim[i].pad = geometry[3 + i];
    c.dim[i].dil = geometry[6 + i];
    if (c.dim[i].stride < 1 || c.dim[i].dil < 1) return -5;
  }
  c.groups = geometry[9];  // 0: from the shapes (conv_forward_args only)
  if (args->inputs[0].ndim != 5 || args->inputs[1].ndim != 5 || args->outputs[0].ndim != 5) {
    return -2;
  }
  return 0;
}

/// The checks both share once c.n, c.c, c.co, c.cig and c.cog are set: y's batch and channels,
/// the spatial extents (into c.dim[i].in/out/k), dtypes, strides, the bias, the chain's channel
/// tensors, and the data pointers.
inline int read_tensors(const kforge_args* args, ConvArgs& c) {
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  const DLTensor& y = args->outputs[0];
  if (y.shape[0] != c.n || y.shape[1] != c.co) return -2;
  for (int i = 0; i < 3; ++i) {
    ConvDim& d = c.dim[i];
    d.in = x.shape[2 + i];
    d.out = y.shape[2 + i];
    d.k = static_cast<int>(w.shape[2 + i]);
    if (d.k < 1 || d.in < 1 || d.out < 1) return -2;
  }
  if (!is_f32(x) || !is_f32(w) || !is_f32(y)) return -3;
  if (!is_compact(x) || !is_compact(w) || !is_compact(y)) return -4;
  if (args->num_inputs - ep::kChannelTensors == 3) {
    const DLTensor& b = args->inputs[2];
    if (b.ndim != 1 || b.shape[0] != c.co) return -2;
    if (!is_f32(b)) return -3;
    if (!is_compact(b)) return -4;
    c.bias = data_of<const float>(b);
  }
  if (const int code = ep::load_channel_tensors(args, c.operands, c.co); code != 0) return code;
  c.x = data_of<const float>(x);
  c.w = data_of<const float>(w);
  c.y = data_of<float>(y);
  return 0;
}

}  // namespace conv_detail

/// Fills `c` from `args` for a transposed convolution (weight [c, cog, kd, kh, kw]). Returns 0,
/// or -1 wrong tensor or scalar count (fewer than 10, or more than ep::kMaxScalars), -2 wrong
/// rank or shape (channels that the groups do not divide included), -3 wrong dtype, -4
/// non-compact strides, -5 a geometry scalar out of range (stride or dilation < 1, padding < 0,
/// groups < 1, or not an integer).
inline int conv_transpose_args(const kforge_args* args, ConvArgs& c) {
  if (const int code = conv_detail::read_geometry(args, c); code != 0) return code;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  if (c.groups < 1) return -5;
  c.n = x.shape[0];
  c.c = x.shape[1];
  c.cog = static_cast<int>(w.shape[1]);
  c.co = static_cast<int64_t>(c.groups) * c.cog;
  if (w.shape[0] != c.c || c.c % c.groups != 0) return -2;
  c.cig = static_cast<int>(c.c / c.groups);
  return conv_detail::read_tensors(args, c);
}

/// Output extent of a forward convolution along one dimension (PyTorch's nn.Conv3d formula):
/// floor((in + 2 * padding - dilation * (k - 1) - 1) / stride) + 1, or <= 0 when the dilated
/// kernel does not fit the padded input.
KF_CONV_HD int64_t conv_forward_extent(int64_t in, int64_t k, int64_t stride, int64_t pad,
                                       int64_t dil) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

/// Fills `c` from `args` for a forward convolution (weight [co, cig, kd, kh, kw]); groups 0 means
/// c / cig. Returns what conv_transpose_args does, and -2 also when y's spatial extents are not
/// conv_forward_extent's.
inline int conv_forward_args(const kforge_args* args, ConvArgs& c) {
  if (const int code = conv_detail::read_geometry(args, c); code != 0) return code;
  const DLTensor& x = args->inputs[0];
  const DLTensor& w = args->inputs[1];
  c.n = x.shape[0];
  c.c = x.shape[1];
  c.co = w.shape[0];
  c.cig = static_cast<int>(w.shape[1]);
  // groups 0: as many as the shapes say, c / cig (a depthwise convolution whose channel count
  // varies across a task's workloads; python/kforge_torch/conv_match.py).
  if (c.groups == 0 && c.cig > 0 && c.c % c.cig == 0) c.groups = static_cast<int>(c.c / c.cig);
  if (c.groups < 1) return -5;
  if (c.co % c.groups != 0 || c.c != static_cast<int64_t>(c.groups) * c.cig) return -2;
  c.cog = static_cast<int>(c.co / c.groups);
  if (const int code = conv_detail::read_tensors(args, c); code != 0) return code;
  for (const ConvDim& d : c.dim) {
    if (d.out != conv_forward_extent(d.in, d.k, d.stride, d.pad, d.dil)) return -2;
  }
  return 0;
}

}  // namespace kf

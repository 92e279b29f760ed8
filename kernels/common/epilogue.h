// The element-wise epilogue of the gemm_epilogue and grouped_conv_transpose families:
// Y = epilogue(X W^T + b) or epilogue(conv_transpose(x, w) + b), applied to each output element
// in fp32 as it is stored (host and device code; plain C++17 / CUDA C++).
//
// A task names its chain (`epilogue = ["relu", "div:divisor"]`, task.h Task::epilogue); the
// templates generator writes it as one define of ops joined by `|`, each op naming the index of
// the task scalar it reads:
//
//   -DKF_EPILOGUE=kf::ep::Relu{}|kf::ep::Div{0}        (no comma: nvcc splits -D values on ',')
//
//   #include <common/epilogue.h>
//   const auto epilogue = KF_EPILOGUE;                 // kf::ep::Identity{} when not defined
//   const kf::ep::Scalars s = kf::ep::load_scalars(args);
//   y = epilogue(acc + bias, s.v);
//
// Each op keeps PyTorch's semantics, NaN included (relu and clamp pass NaN through, as
// torch.relu and torch.clamp do). Scalars reach the kernel as doubles (kforge_args::scalars) and
// are rounded to float once, as PyTorch does when it multiplies an fp32 tensor by a Python float.
#pragma once

#include <kforge/kernel.h>

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define KF_EP_HD __host__ __device__ __forceinline__
#else
#define KF_EP_HD inline
#endif

namespace kf::ep {

/// Most scalars a chain may read (task scalars beyond these are an error at load_scalars).
constexpr int kMaxScalars = 24;  // a conv's ten geometry scalars, then the chain's

/// The task's scalars as floats, passed by value into device code.
struct Scalars {
  float v[kMaxScalars];
};

/// Copies args->scalars into a Scalars; returns false when there are more than kMaxScalars.
inline bool load_scalars(const kforge_args* args, Scalars& out) {
  for (int i = 0; i < kMaxScalars; ++i) out.v[i] = 0.0f;
  if (args->num_scalars > kMaxScalars) return false;
  for (int i = 0; i < args->num_scalars; ++i) out.v[i] = static_cast<float>(args->scalars[i]);
  return true;
}

// Ops: `float operator()(float v, const float* s) const`; members are scalar indices.
// `kf_epilogue_op` marks a type as an op for operator| below.

struct Identity {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const { return v; }
};

/// max(v, 0); NaN stays NaN.
struct Relu {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const { return v < 0.0f ? 0.0f : v; }
};

/// v for v >= 0, else v * s[slope] (torch.nn.LeakyReLU).
struct LeakyRelu {
  static constexpr bool kf_epilogue_op = true;
  int slope;
  KF_EP_HD float operator()(float v, const float* s) const { return v < 0.0f ? v * s[slope] : v; }
};

struct Mul {
  static constexpr bool kf_epilogue_op = true;
  int factor;
  KF_EP_HD float operator()(float v, const float* s) const { return v * s[factor]; }
};

/// v / s[divisor], a true division (PyTorch's CUDA kernel multiplies by the reciprocal of a
/// scalar divisor instead: the two differ by at most an ulp, far inside any tolerance).
struct Div {
  static constexpr bool kf_epilogue_op = true;
  int divisor;
  KF_EP_HD float operator()(float v, const float* s) const { return v / s[divisor]; }
};

struct Add {
  static constexpr bool kf_epilogue_op = true;
  int addend;
  KF_EP_HD float operator()(float v, const float* s) const { return v + s[addend]; }
};

struct Sub {
  static constexpr bool kf_epilogue_op = true;
  int subtrahend;
  KF_EP_HD float operator()(float v, const float* s) const { return v - s[subtrahend]; }
};

/// max(v, s[lo]) and min(v, s[hi]): torch.clamp(v, lo, hi) is ClampMin{lo} | ClampMax{hi} (two
/// ops, since a define must not hold a comma). NaN stays NaN.
struct ClampMin {
  static constexpr bool kf_epilogue_op = true;
  int lo;
  KF_EP_HD float operator()(float v, const float* s) const { return v < s[lo] ? s[lo] : v; }
};

struct ClampMax {
  static constexpr bool kf_epilogue_op = true;
  int hi;
  KF_EP_HD float operator()(float v, const float* s) const { return v > s[hi] ? s[hi] : v; }
};

/// v * s[scale] + v: "x * scale + x" with x kept from before the scaling (KernelBench L2/40's
/// residual add), rounded as PyTorch rounds the two steps.
struct ScaleResidual {
  static constexpr bool kf_epilogue_op = true;
  int scale;
  KF_EP_HD float operator()(float v, const float* s) const { return v * s[scale] + v; }
};

/// GELU with the exact erf form (torch.nn.functional.gelu, approximate='none').
struct Gelu {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
};

/// GELU, tanh approximation (approximate='tanh').
struct GeluTanh {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const {
    const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
  }
};

struct Sigmoid {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const { return 1.0f / (1.0f + expf(-v)); }
};

struct Tanh {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const { return tanhf(v); }
};

/// v * sigmoid(v) (SiLU / Swish).
struct Swish {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const float*) const { return v / (1.0f + expf(-v)); }
};

/// First `a`, then `b`.
template <class A, class B>
struct Then {
  static constexpr bool kf_epilogue_op = true;
  A a;
  B b;
  KF_EP_HD float operator()(float v, const float* s) const { return b(a(v, s), s); }
};

template <class T, class = void>
struct is_op : std::false_type {};
template <class T>
struct is_op<T, std::void_t<decltype(T::kf_epilogue_op)>> : std::true_type {};

/// `Relu{} | Div{0}`: relu, then divide. Only ops take part (is_op), never integers.
template <class A, class B, class = std::enable_if_t<is_op<A>::value && is_op<B>::value>>
KF_EP_HD constexpr Then<A, B> operator|(A a, B b) {
  return Then<A, B>{a, b};
}

}  // namespace kf::ep

#ifndef KF_EPILOGUE
#define KF_EPILOGUE kf::ep::Identity{}
#endif

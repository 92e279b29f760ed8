// The element-wise epilogue of the gemm_epilogue and convolution families:
// Y = epilogue(X W^T + b) or epilogue(conv(x, w) + b), applied to each output element in fp32 as
// it is stored (host and device code; plain C++17 / CUDA C++).
//
// A task names its chain (`epilogue = ["relu", "div:divisor", "add_channel:bias2"]`, task.h
// Task::epilogue); the templates generator writes it as one define of ops joined by `|`, each op
// naming the index of the task scalar it reads, or of the channel tensor it reads:
//
//   -DKF_EPILOGUE=kf::ep::Relu{}|kf::ep::Div{0}|kf::ep::AddChannel{0}
//   -DKF_EPILOGUE_TENSORS=1            (no comma anywhere: nvcc splits -D values on ',')
//
// A channel tensor holds one value per output channel (a conv's co, a GEMM's column n; any shape
// with that many elements, e.g. a [C, 1, 1] nn.Parameter) and is one of the kernel's last
// KF_EPILOGUE_TENSORS inputs, in the chain's order of first use (core/epilogue.h checks the task).
//
//   #include <common/epilogue.h>
//   const auto epilogue = KF_EPILOGUE;                 // kf::ep::Identity{} when not defined
//   kf::ep::Operands o;
//   if (!kf::ep::load_scalars(args, o)) return -1;
//   if (int code = kf::ep::load_channel_tensors(args, o, channels); code) return code;
//   y = epilogue(acc + bias, o, channel);
//
// Each op keeps PyTorch's semantics, NaN included (relu and clamp pass NaN through, as
// torch.relu and torch.clamp do). Scalars reach the kernel as doubles (kforge_args::scalars) and
// are rounded to float once, as PyTorch does when it multiplies an fp32 tensor by a Python float.
#pragma once

#include <common/dltensor.h>
#include <kforge/kernel.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define KF_EP_HD __host__ __device__ __forceinline__
#else
#define KF_EP_HD inline
#endif

namespace kf::ep {

/// Most scalars a chain may read (task scalars beyond these are an error at load_scalars).
constexpr int kMaxScalars = 24;  // a conv's ten geometry scalars, then the chain's

/// Most channel tensors a chain may read.
constexpr int kMaxChannelTensors = 4;

#ifndef KF_EPILOGUE_TENSORS
#define KF_EPILOGUE_TENSORS 0
#endif
static_assert(KF_EPILOGUE_TENSORS >= 0 && KF_EPILOGUE_TENSORS <= kMaxChannelTensors,
              "KF_EPILOGUE_TENSORS is 0..4");
/// How many of the kernel's inputs (the last ones) are the chain's channel tensors.
constexpr int kChannelTensors = KF_EPILOGUE_TENSORS;

/// What the chain reads besides the value: every task scalar as a float (v, by index) and the
/// channel tensors (t, each [channels] fp32 in the kernel's memory). Passed by value into device
/// code.
struct Operands {
  float v[kMaxScalars];
  const float* t[kMaxChannelTensors];
};

/// Copies args->scalars into `out.v` (rounded to float) and clears `out.t`; returns false when
/// there are more than kMaxScalars.
inline bool load_scalars(const kforge_args* args, Operands& out) {
  for (int i = 0; i < kMaxScalars; ++i) out.v[i] = 0.0f;
  for (int i = 0; i < kMaxChannelTensors; ++i) out.t[i] = nullptr;
  if (args->num_scalars > kMaxScalars) return false;
  for (int i = 0; i < args->num_scalars; ++i) out.v[i] = static_cast<float>(args->scalars[i]);
  return true;
}

/// Points `out.t` at the last kChannelTensors inputs. Returns 0, or -1 fewer inputs than that,
/// -2 a tensor whose element count is not `channels`, -3 not fp32, -4 not compact.
inline int load_channel_tensors(const kforge_args* args, Operands& out, int64_t channels) {
  if (args->num_inputs < kChannelTensors) return -1;
  for (int i = 0; i < kChannelTensors; ++i) {
    const DLTensor& t = args->inputs[args->num_inputs - kChannelTensors + i];
    if (element_count(t) != channels) return -2;
    if (!is_f32(t)) return -3;
    if (!is_compact(t)) return -4;
    out.t[i] = data_of<const float>(t);
  }
  return 0;
}

// Ops: `float operator()(float v, const Operands& o, int64_t channel) const`; members are
// scalar indices (o.v) or channel-tensor indices (o.t). `kf_epilogue_op` marks a type as an op
// for operator| below.

struct Identity {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const { return v; }
};

/// max(v, 0); NaN stays NaN.
struct Relu {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const { return v < 0.0f ? 0.0f : v; }
};

/// v for v >= 0, else v * o.v[slope] (torch.nn.LeakyReLU).
struct LeakyRelu {
  static constexpr bool kf_epilogue_op = true;
  int slope;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v < 0.0f ? v * o.v[slope] : v;
  }
};

struct Mul {
  static constexpr bool kf_epilogue_op = true;
  int factor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const { return v * o.v[factor]; }
};

/// v / o.v[divisor], a true division (PyTorch's CUDA kernel multiplies by the reciprocal of a
/// scalar divisor instead: the two differ by at most an ulp, far inside any tolerance).
struct Div {
  static constexpr bool kf_epilogue_op = true;
  int divisor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const { return v / o.v[divisor]; }
};

struct Add {
  static constexpr bool kf_epilogue_op = true;
  int addend;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const { return v + o.v[addend]; }
};

struct Sub {
  static constexpr bool kf_epilogue_op = true;
  int subtrahend;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v - o.v[subtrahend];
  }
};

/// max(v, o.v[lo]) and min(v, o.v[hi]): torch.clamp(v, lo, hi) is ClampMin{lo} | ClampMax{hi} (two
/// ops, since a define must not hold a comma). NaN stays NaN.
struct ClampMin {
  static constexpr bool kf_epilogue_op = true;
  int lo;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v < o.v[lo] ? o.v[lo] : v;
  }
};

struct ClampMax {
  static constexpr bool kf_epilogue_op = true;
  int hi;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v > o.v[hi] ? o.v[hi] : v;
  }
};

/// v * o.v[scale] + v: "x * scale + x" with x kept from before the scaling (KernelBench L2/40's
/// residual add), rounded as PyTorch rounds the two steps.
struct ScaleResidual {
  static constexpr bool kf_epilogue_op = true;
  int scale;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v * o.v[scale] + v;
  }
};

/// GELU with the exact erf form (torch.nn.functional.gelu, approximate='none').
struct Gelu {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
};

/// GELU, tanh approximation (approximate='tanh').
struct GeluTanh {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
  }
};

struct Sigmoid {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    return 1.0f / (1.0f + expf(-v));
  }
};

struct Tanh {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const { return tanhf(v); }
};

/// v * sigmoid(v) (SiLU / Swish).
struct Swish {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    return v / (1.0f + expf(-v));
  }
};

/// v * relu6(v + 3) / 6 (torch.nn.Hardswish; Howard et al. 2019, "Searching for MobileNetV3").
struct Hardswish {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    const float r = v + 3.0f;
    const float r6 = r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r);
    return v * r6 / 6.0f;
  }
};

/// relu6(v + 3) / 6 (torch.nn.Hardsigmoid).
struct Hardsigmoid {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    const float r = v + 3.0f;
    return (r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r)) / 6.0f;
  }
};

/// log(1 + exp(v)), and v itself above 20 (torch.nn.Softplus with beta 1, threshold 20).
struct Softplus {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    return v > 20.0f ? v : log1pf(expf(v));
  }
};

/// v * tanh(softplus(v)) (torch.nn.Mish; Misra 2019).
struct Mish {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return v * tanhf(Softplus{}(v, o, ch));
  }
};

/// v for v > 0, else s[alpha] * (exp(v) - 1) (torch.nn.ELU).
struct Elu {
  static constexpr bool kf_epilogue_op = true;
  int alpha;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t) const {
    return v > 0.0f ? v : o.v[alpha] * expm1f(v);
  }
};

/// scale * (v for v > 0, else alpha * (exp(v) - 1)) with SELU's fixed constants (torch.nn.SELU;
/// Klambauer et al. 2017, "Self-Normalizing Neural Networks").
struct Selu {
  static constexpr bool kf_epilogue_op = true;
  KF_EP_HD float operator()(float v, const Operands&, int64_t) const {
    return 1.0507009873554804934f * (v > 0.0f ? v : 1.6732632423543772848f * expm1f(v));
  }
};

/// v + t[tensor][channel]: a per-channel tensor added (KernelBench L2/1's `x + self.bias` with
/// bias [C, 1, 1] after a convolution).
struct AddChannel {
  static constexpr bool kf_epilogue_op = true;
  int tensor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return v + o.t[tensor][ch];
  }
};

struct SubChannel {
  static constexpr bool kf_epilogue_op = true;
  int tensor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return v - o.t[tensor][ch];
  }
};

struct MulChannel {
  static constexpr bool kf_epilogue_op = true;
  int tensor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return v * o.t[tensor][ch];
  }
};

/// v / t[tensor][channel], a true division.
struct DivChannel {
  static constexpr bool kf_epilogue_op = true;
  int tensor;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return v / o.t[tensor][ch];
  }
};

/// First `a`, then `b`.
template <class A, class B>
struct Then {
  static constexpr bool kf_epilogue_op = true;
  A a;
  B b;
  KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const {
    return b(a(v, o, ch), o, ch);
  }
};

// Branch ops: the running value combined with a chain `f` of it, "v * f(v)" (KernelBench's
// x * torch.sigmoid(x), x * torch.clamp((x + 3) / 6, 0, 1), x + s * sigmoid(x)). Written
// `MulBranch{Softplus{} | Tanh{}}` (no comma; the deduction guides give the template argument).
#define KF_EP_BRANCH(NAME, EXPR)                                         \
  template <class F>                                                     \
  struct NAME {                                                          \
    static constexpr bool kf_epilogue_op = true;                         \
    F f;                                                                 \
    KF_EP_HD float operator()(float v, const Operands& o, int64_t ch) const { \
      const float b = f(v, o, ch);                                       \
      return EXPR;                                                       \
    }                                                                    \
  };                                                                     \
  template <class F>                                                     \
  NAME(F) -> NAME<F>;

KF_EP_BRANCH(AddBranch, v + b)   // v + f(v)
KF_EP_BRANCH(MulBranch, v * b)   // v * f(v)
KF_EP_BRANCH(SubBranch, v - b)   // v - f(v)
KF_EP_BRANCH(RsubBranch, b - v)  // f(v) - v
KF_EP_BRANCH(DivBranch, v / b)   // v / f(v)
KF_EP_BRANCH(RdivBranch, b / v)  // f(v) / v
#undef KF_EP_BRANCH

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
#define KF_EPILOGUE \
  kf::ep::Identity {}
#endif

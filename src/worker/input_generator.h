// The element generator behind fill_input (host_data.h), written once for the host and the GPU:
// host_data.cpp fills host buffers with it on all cores, cuda_inputs.cu fills device memory with
// it, and both produce the same bytes. That is what lets a cuda worker generate gigabytes of
// inputs in place (milliseconds, no upload) and check after a call that a kernel left its inputs
// unchanged by regenerating them on the device, while the expected outputs computed by the
// reference worker still follow the values host_data.h documents.
//
// Bit-identical on host and device because only correctly rounded IEEE operations are used (+, -,
// *, /, sqrt, conversions): no transcendental functions, whose host and device versions differ
// in the last bits, and no contraction of a*b+c into a fused multiply-add. Host: host_data.cpp
// switches contraction off for its whole file before including this header. Device:
// cuda_inputs.cu is compiled with -fmad=false (CMakeLists.txt). The golden-value test
// (host_data_test.cpp) pins the host bytes, the GPU test (gpu_worker_test.cpp) the device ones
// against the host's.
#pragma once

#include <cstdint>
#include <cstring>


#if defined(__CUDACC__)
#define KF_HD __host__ __device__ __forceinline__
#else
#define KF_HD [[gnu::always_inline]] inline
#endif

namespace kforge::worker::generator {

/// How generated values are distributed; the same numbering as InputDistribution (host_data.h).
enum class Distribution : int {
  uniform = 0,
  normal = 1,
  heavy_tailed = 2,
  small = 3,
  pareto = 4,
  spike = 5
};
/// Index remaps of the self-test probes; the same numbering as InputRemap (host_data.h).
enum class Remap : int { none = 0, every_16th = 1, half_rows = 2 };
/// Element types; the same numbering as DType (task.h), which this header does not include so
/// that nvcc never sees the task module's headers (host_data.cpp checks the numbering).
enum class Element : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i32 = 4, i64 = 5, b8 = 6 };

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLog2Of10 = 3.32192809488736234787;
constexpr double kLog2OfE = 1.44269504088896340736;
constexpr double kSqrt2 = 1.41421356237309504880;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // SplitMix64's increment, 2^64 / phi
/// The 256-layer ziggurat of Marsaglia & Tsang (J. Stat. Software 5(8), 2000): the start of the
/// tail and the area of every layer.
constexpr double kZigguratTail = 3.6541528853610088;
constexpr double kZigguratLayerArea = 4.92867323399e-3;
constexpr int kZigguratLayers = 256;
/// Rejected ziggurat draws retry at most this often. An attempt fails with probability below 0.07
/// (the tail method rejects 6.3%; a wedge rejection is followed by a fresh draw that takes the fast
/// path 98.8% of the time), so 64 failures in a row never happen in practice.
constexpr int64_t kZigguratAttempts = 64;

/// Most dimensions a GeneratedTensor describes.
constexpr int kMaxDims = 8;

/// One tensor's generated values and layout. Element e (row-major logical index) is element
/// remapped_index(remap, shape[0], elements, e) of fill_input(dtype, seed, tensor_index,
/// distribution) (host_data.h). `strides` in elements, all
/// positive and ordered like a padded row-major layout (each at least the extent of the next
/// dimension), or `compact` for the row-major layout; storage elements that no logical element
/// maps to (gaps) hold 0xFF bytes.
struct GeneratedTensor {
  int dtype = 0;          // DType (task.h) as int
  int element_bytes = 4;  // dtype_size(dtype): 2, 4 or 8
  uint64_t seed = 0;
  int tensor_index = 0;
  int distribution = 0;  // InputDistribution as int
  int ndim = 0;          // <= kMaxDims
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  bool compact = true;
  int64_t storage_elements = 0;  // elements of storage, gaps included
  int remap = 0;                 // Remap as int: element e holds the value of remapped_index(e)
};

/// The tables the generator reads (6 KB), built once on the host from IEEE operations only
/// (host_data.cpp: tables()) and copied to device memory by cuda_inputs.cu.
struct Tables {
  double exp2_fractions[256];                   // 2^(j/256)
  double layer_x[kZigguratLayers + 1];          // x_0 = V/f(r) > x_1 = r > ... > x_256 = 0
  double layer_f[kZigguratLayers + 1];          // f(x_i) = exp(-x_i^2 / 2)
};

/// The tables, built on first use on the host (host_data.cpp); the cuda backend copies them to
/// the device.
const Tables& tables();

template <typename To, typename From>
KF_HD To bits_as(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

/// The SplitMix64 step (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): the output that follows state `x`. Passes BigCrush as a counter hash.
KF_HD uint64_t splitmix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// Output number `index` (0-based) of SplitMix64 started at state `key`.
KF_HD uint64_t stream_value(uint64_t key, int64_t index) {
  return splitmix64(key + static_cast<uint64_t>(index) * kGolden);
}

/// The ~1% exact zeros: 10 of the 1024 values of the top ten bits (values use the low bits).
KF_HD bool is_zero_draw(uint64_t bits) { return (bits >> 54) < 10; }

/// `value` negated when `negate` is 1; branch-free because the sign is a coin flip.
KF_HD double negated_if(double value, uint64_t negate) {
  return bits_as<double>(bits_as<uint64_t>(value) ^ (negate << 63));
}

/// `bits` (below 2^53) as a double, exactly; a signed conversion is one instruction on x86-64.
KF_HD double exact_double(uint64_t bits) { return static_cast<double>(static_cast<int64_t>(bits)); }

/// 2^t for t = fixed / 2^32 - 64 in (-64, 64) (32.32 fixed point, offset so it is positive):
/// 2^(whole part) exactly, times the table entry 2^(j/256) for the next 8 bits, times e^x for the
/// last 24 bits, 0 <= x < ln 2 / 256, by the Taylor series to x^3 (relative error below 1e-11).
KF_HD double exp2_fixed(const Tables& t, uint64_t fixed) {
  const double x = exact_double(fixed & 0xFFFFFFu) * (kLn2 * 0x1p-32);
  const double series = (1 + x) + (x * x) * (0.5 + x * (1.0 / 6));
  const double scale = bits_as<double>(((fixed >> 32) - 64 + 1023) << 52);
  return t.exp2_fractions[(fixed >> 24) & 255] * series * scale;
}

/// exp(-x^2 / 2) for |x| < 9, the unnormalized standard normal density (via 2^t, t > -60, whose
/// positive fixed-point form truncates like a floor).
KF_HD double gaussian(const Tables& t, double x) {
  return exp2_fixed(t, static_cast<uint64_t>((64 - 0.5 * x * x * kLog2OfE) * 0x1p32));
}

/// Natural log of a positive normal double: exponent * ln 2 + 2 atanh((m - 1) / (m + 1)) with the
/// mantissa m in [sqrt(1/2), sqrt(2)), so |s| <= 0.172 and the series to s^11 errs below 1e-9.
KF_HD double log_approx(double value) {
  const uint64_t bits = bits_as<uint64_t>(value);
  const double mantissa =
      bits_as<double>((bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52));
  const bool above = mantissa > kSqrt2;
  const double m = above ? mantissa * 0.5 : mantissa;
  const auto exponent = static_cast<int64_t>(bits >> 52) - 1023 + above;
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  const double series =
      1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 * (1.0 / 11)))));
  return static_cast<double>(exponent) * kLn2 + 2 * s * series;
}

/// The low 53 bits as a double uniform on the 2^-52 grid in [-1, 1); exact, no rounding.
KF_HD double uniform_value(uint64_t bits) {
  return exact_double(bits & ((uint64_t{1} << 53) - 1)) * 0x1p-52 - 1;
}

/// log2 of the heavy-tailed magnitude in exp2_fixed's format: 26 random bits scaled to the span
/// 6 log2(10) (u in [-3, 3) decades), offset by 64 - 3 log2(10). The products stay below 2^63.
constexpr uint64_t kHeavySpanFixed = static_cast<uint64_t>(6 * kLog2Of10 * 0x1p32);
constexpr uint64_t kHeavyOffsetFixed = static_cast<uint64_t>((64 - 3 * kLog2Of10) * 0x1p32);

/// Sign from bit 32, magnitude 10^u with u uniform in [-3, 3) from the low 26 bits, all in
/// integer arithmetic up to exp2_fixed (a short dependency chain). The largest u is 3 - 9e-8, so
/// magnitudes stay below 1e3 by far more than the series error: no cap needed.
KF_HD double heavy_tailed_value(const Tables& t, uint64_t bits) {
  const uint64_t octaves = ((bits & 0x3FFFFFFu) * kHeavySpanFixed >> 26) + kHeavyOffsetFixed;
  return negated_if(exp2_fixed(t, octaves), (bits >> 32) & 1);
}

/// Pareto tail: +-u1 / u2 with u1, u2 uniform on the grid (0, 1] of step 2^-26 (bits 0..25 and
/// 26..51; the common scale cancels, so the ratio of the integers is one correctly rounded
/// division), sign from bit 52. |x| below 1 has density 1/2; beyond 1, P(|x| > t) = 1 / (2t), the
/// tail of Pareto(alpha = 1) and of Cauchy, so the mean of n values is dominated by the largest
/// few at random positions. |x| lies in [2^-26, 2^26].
KF_HD double pareto_value(uint64_t bits) {
  const double u1 = exact_double((bits & 0x3FFFFFFu) + 1);
  const double u2 = exact_double(((bits >> 26) & 0x3FFFFFFu) + 1);
  return negated_if(u1 / u2, (bits >> 52) & 1);
}

/// Sparse spikes: one element in 2^12 (bits 40..51 all zero) is +-[2^10, 2^11) (bits 0..19), the
/// rest are "small" values, uniform in [-2^-10, 2^-10): a spike outweighs the sum of 2^20 others,
/// and a kernel that reads a subsample or drops elements misses most spikes.
constexpr uint64_t kSpikeBits = uint64_t{0xFFF} << 40;
KF_HD bool is_spike(uint64_t bits) { return (bits & kSpikeBits) == 0; }
KF_HD double spike_value(uint64_t bits) {
  if (!is_spike(bits)) return uniform_value(bits) * 0x1p-10;
  const double magnitude = 0x1p10 + exact_double(bits & 0xFFFFFu) * 0x1p-10;
  return negated_if(magnitude, (bits >> 52) & 1);
}

/// Self-test probes: the element whose value logical element `e` of an `elements`-element tensor
/// with `rows` rows (its first dimension) holds. every_16th: element 16 * floor(e / 16), so a
/// kernel that reads every 16th element sees the whole input; half_rows: the last floor(rows / 2)
/// rows repeat the first ones (row r >= kept = rows - floor(rows / 2) holds row r - kept).
constexpr int64_t kSubsampleStride = 16;
KF_HD int64_t remapped_index(int remap, int64_t rows, int64_t elements, int64_t e) {
  if (remap == static_cast<int>(Remap::every_16th)) return e - e % kSubsampleStride;
  if (remap != static_cast<int>(Remap::half_rows) || rows < 2 || elements <= 0) return e;
  const int64_t row_elements = elements / rows;
  const int64_t kept = rows - rows / 2;
  return e / row_elements < kept ? e : e - kept * row_elements;
}

/// Ziggurat layer (bits 45..52) and the point u * x_layer, u uniform in [0, 1) from bits 0..44.
struct ZigguratDraw {
  uint64_t layer;
  double point;
};
KF_HD ZigguratDraw ziggurat_draw(const Tables& t, uint64_t bits) {
  const uint64_t layer = (bits >> 45) & (kZigguratLayers - 1);
  return {layer, exact_double(bits & ((uint64_t{1} << 45) - 1)) * 0x1p-45 * t.layer_x[layer]};
}

/// |standard normal| once the first draw fell outside its layer's rectangle (1.2% of draws): in
/// the base layer, Marsaglia's tail method (repeated until it accepts); in a wedge, the density
/// test, and on rejection a fresh draw. Attempt k uses outputs 128 * element + 2k and 2k + 1 of
/// the retry stream, so the value stays a function of the element index.
#if defined(__CUDACC__)
__host__ __device__ __noinline__
#else
[[gnu::noinline]] inline
#endif
double ziggurat_slow_path(const Tables& t, uint64_t retry_key, int64_t element,
                          ZigguratDraw draw) {
  const int64_t first_draw = element * 2 * kZigguratAttempts;
  for (int64_t attempt = 0; attempt < kZigguratAttempts; ++attempt) {
    const uint64_t extra = stream_value(retry_key, first_draw + 2 * attempt);
    const double u1 = exact_double((extra >> 32) + 1) * 0x1p-32;  // both in (0, 1]
    const double u2 = exact_double((extra & 0xFFFFFFFFu) + 1) * 0x1p-32;
    if (draw.layer == 0) {
      const double x = -log_approx(u1) / kZigguratTail;
      if (-2 * log_approx(u2) > x * x) return kZigguratTail + x;
      continue;
    }
    const double f_low = t.layer_f[draw.layer], f_high = t.layer_f[draw.layer + 1];
    if (f_low + u2 * (f_high - f_low) < gaussian(t, draw.point)) return draw.point;
    draw = ziggurat_draw(t, stream_value(retry_key, first_draw + 2 * attempt + 1));
    if (draw.point < t.layer_x[draw.layer + 1]) return draw.point;
  }
  return 0;  // unreachable in practice (kZigguratAttempts)
}

/// `value` rounded to float toward zero, with the last bit set when inexact ("round to odd").
/// A later round-to-nearest to half or bfloat16 (at least 2 bits narrower) then equals one direct
/// rounding of `value` (Boldo & Melquiond, IEEE Trans. Computers 57(4), 2008, Theorem 1).
KF_HD float round_to_odd_float(double value) {
  const auto nearest = static_cast<float>(value);
  const double widened = nearest;
  const uint32_t inexact = widened != value;
  const uint32_t rounded_away = (widened < 0 ? -widened : widened) > (value < 0 ? -value : value);
  return bits_as<float>((bits_as<uint32_t>(nearest) - rounded_away) | inexact);
}

/// IEEE 754 binary16 bits of `value`, rounded to nearest even; overflow gives +-inf, NaN stays
/// NaN (quiet, non-zero payload), tiny values become subnormals or zero.
KF_HD uint16_t half_from_float(float value) {
  const uint32_t bits = bits_as<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t exponent = (bits >> 23) & 0xFFu;
  uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFF) {  // inf or NaN; keep NaN quiet and non-zero
    return static_cast<uint16_t>(sign | 0x7C00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (half_exponent <= 0) {
    if (half_exponent < -10) return static_cast<uint16_t>(sign);  // below half a subnormal ulp
    mantissa |= 0x800000u;  // implicit leading one, then shift into subnormal position
    const int shift = 14 - half_exponent;
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t result = mantissa >> shift;
    result += static_cast<uint32_t>(remainder > halfway) | (remainder == halfway ? result & 1u : 0u);
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1FFFu;
  // Round to nearest even; a carry into the exponent correctly rounds up to the next binade/inf.
  // Branch-free: on random data the round-up decision is a coin flip.
  result += static_cast<uint32_t>(remainder > 0x1000u) | (remainder == 0x1000u ? result & 1u : 0u);
  return static_cast<uint16_t>(sign | result);
}

/// bfloat16 bits of `value` (the top 16 bits of the float, rounded to nearest even; NaN stays NaN).
KF_HD uint16_t bfloat16_from_float(float value) {
  const uint32_t bits = bits_as<uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN, never rounds to inf
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

/// Everything an element depends on besides its index: the keys of its two streams.
struct Stream {
  Distribution distribution = Distribution::uniform;
  uint64_t element_key = 0;  // one draw per element: zero decision, sign, value
  uint64_t retry_key = 0;    // further draws of rejected ziggurat samples
};

/// The keys of tensor `tensor_index` under `seed` (host_data.h documents the scheme).
KF_HD Stream make_stream(uint64_t seed, int tensor_index, Distribution distribution) {
  uint64_t key = splitmix64(seed);
  key = splitmix64(key ^ static_cast<uint32_t>(tensor_index));
  Stream stream;
  stream.distribution = distribution;
  stream.element_key = splitmix64(key ^ ((static_cast<uint64_t>(distribution) + 1) << 32));
  stream.retry_key = splitmix64(stream.element_key ^ kGolden);
  return stream;
}

/// Floating value of element `e`, in double, before rounding to the dtype.
KF_HD double real_element(const Tables& t, const Stream& s, int64_t e) {
  const uint64_t bits = stream_value(s.element_key, e);
  double value = 0;
  switch (s.distribution) {
    case Distribution::uniform:
      value = uniform_value(bits);
      break;
    case Distribution::normal: {
      const ZigguratDraw draw = ziggurat_draw(t, bits);
      const double magnitude = draw.point < t.layer_x[draw.layer + 1]
                                   ? draw.point
                                   : ziggurat_slow_path(t, s.retry_key, e, draw);
      value = negated_if(magnitude, (bits >> 53) & 1);
      break;
    }
    case Distribution::heavy_tailed:
      value = heavy_tailed_value(t, bits);
      break;
    case Distribution::small:
      value = uniform_value(bits) * 0x1p-10;  // a power of two: exact, host and device alike
      break;
    case Distribution::pareto:
      value = pareto_value(bits);
      break;
    case Distribution::spike:
      value = spike_value(bits);
      break;
  }
  return is_zero_draw(bits) ? 0.0 : value;
}

/// Integer magnitude of one draw: 1..1000 from the low 32 bits for heavy_tailed (multiply-shift,
/// bias below 1e-6); 65536 / (1 + low 16 bits), 1..65536 with P(m >= t) ~ 1/t, for pareto;
/// 1024..2047 for a spike (is_spike) and 1 otherwise for spike; else 1..16 from the low 4 bits.
KF_HD int64_t integer_magnitude(Distribution distribution, uint64_t bits) {
  switch (distribution) {
    case Distribution::heavy_tailed:
      return 1 + static_cast<int64_t>(((bits & 0xFFFFFFFFu) * 1000) >> 32);
    case Distribution::pareto:
      return 65536 / (1 + static_cast<int64_t>(bits & 0xFFFFu));
    case Distribution::spike:
      return is_spike(bits) ? 1024 + static_cast<int64_t>(bits & 1023) : 1;
    default:
      return 1 + static_cast<int64_t>(bits & 15);
  }
}

/// Zero, or sign from bit 32 and integer_magnitude.
KF_HD int64_t integer_element(const Stream& s, int64_t e) {
  const uint64_t bits = stream_value(s.element_key, e);
  const int64_t magnitude = integer_magnitude(s.distribution, bits);
  const auto negative = static_cast<int64_t>((bits >> 32) & 1);
  return is_zero_draw(bits) ? 0 : (magnitude ^ -negative) + negative;  // negated when negative
}

/// A bool element: 1 when the draw's bit 32 (an integer's sign bit) is set and it is not one of
/// the 1% zero draws, else 0; about half the elements are 1 whatever the distribution.
KF_HD uint8_t boolean_element(const Stream& s, int64_t e) {
  const uint64_t bits = stream_value(s.element_key, e);
  return is_zero_draw(bits) ? 0 : static_cast<uint8_t>((bits >> 32) & 1);
}

/// Writes element `e` of a `dtype` tensor to `out` (dtype_size bytes, any alignment).
KF_HD void store_element(const Tables& t, const Stream& s, Element dtype, int64_t e,
                         unsigned char* out) {
  switch (dtype) {
    case Element::f32: {
      const auto v = static_cast<float>(real_element(t, s, e));
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::f64: {
      const double v = real_element(t, s, e);
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::f16: {
      const uint16_t v = half_from_float(round_to_odd_float(real_element(t, s, e)));
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::bf16: {
      const uint16_t v = bfloat16_from_float(round_to_odd_float(real_element(t, s, e)));
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::i32: {
      const auto v = static_cast<int32_t>(integer_element(s, e));
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::i64: {
      const int64_t v = integer_element(s, e);
      std::memcpy(out, &v, sizeof v);
      return;
    }
    case Element::b8:
      *out = boolean_element(s, e);
      return;
  }
}

}  // namespace kforge::worker::generator

#include "worker/host_data.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "common/error.h"

// Generated inputs must be bit-identical on every machine, so their arithmetic uses correctly
// rounded operations only: no libm transcendentals (glibc's log and exp changed results between
// versions) and no contraction of a*b+c into a fused multiply-add, which rounds once instead of
// twice (GCC contracts across statements whenever the target has FMA: -march=haswell, AArch64).
// Set for the whole file so that its functions keep the same options and inline into each other.
// Clang's -ffp-contract=fast overrides the pragma; neither compiler may use -ffast-math here. The
// golden-value test (host_data_test.cpp) fails if either happens.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace kforge::worker {
namespace {

template <typename T>
T load(const std::byte* data, int64_t index) {
  T value;
  std::memcpy(&value, data + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

/// float_to_half's body, inlined where inputs are generated (a call per element costs a third).
[[gnu::always_inline]] inline uint16_t half_from_float(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
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

}  // namespace

uint16_t float_to_half(float value) { return half_from_float(value); }

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  uint32_t result;
  if (exponent == 0x1F) {
    result = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    result = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    result = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    result = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mantissa & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(result);
}

uint16_t float_to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN, never rounds to inf
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bfloat16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

DLDataType to_dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return DLDataType{kDLFloat, 32, 1};
    case DType::f64:
      return DLDataType{kDLFloat, 64, 1};
    case DType::f16:
      return DLDataType{kDLFloat, 16, 1};
    case DType::bf16:
      return DLDataType{kDLBfloat, 16, 1};
    case DType::i32:
      return DLDataType{kDLInt, 32, 1};
    case DType::i64:
      return DLDataType{kDLInt, 64, 1};
  }
  return DLDataType{kDLFloat, 32, 1};
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

double element_as_double(DType dtype, const std::byte* data, int64_t index) {
  switch (dtype) {
    case DType::f32:
      return load<float>(data, index);
    case DType::f64:
      return load<double>(data, index);
    case DType::f16:
      return half_to_float(load<uint16_t>(data, index));
    case DType::bf16:
      return bfloat16_to_float(load<uint16_t>(data, index));
    case DType::i32:
      return load<int32_t>(data, index);
    case DType::i64:
      return static_cast<double>(load<int64_t>(data, index));
  }
  return 0.0;
}

// ---- Input generation -------------------------------------------------------------------------

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLog2Of10 = 3.32192809488736234787;
constexpr double kLog2OfE = 1.44269504088896340736;
constexpr double kSqrt2 = 1.41421356237309504880;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // SplitMix64's increment, 2^64 / phi
/// Below this many elements thread start-up (tens of microseconds) outweighs the work.
constexpr int64_t kParallelMinimumElements = int64_t{1} << 20;
/// Chunk starts are multiples of this, so threads never write the same cache line.
constexpr int64_t kChunkAlignmentElements = 64;
/// The 256-layer ziggurat of Marsaglia & Tsang (J. Stat. Software 5(8), 2000): the start of the
/// tail and the area of every layer.
constexpr double kZigguratTail = 3.6541528853610088;
constexpr double kZigguratLayerArea = 4.92867323399e-3;
constexpr int kZigguratLayers = 256;
/// Rejected ziggurat draws retry at most this often. An attempt fails with probability below 0.07
/// (the tail method rejects 6.3%; a wedge rejection is followed by a fresh draw that takes the fast
/// path 98.8% of the time), so 64 failures in a row never happen in practice.
constexpr int64_t kZigguratAttempts = 64;

/// The SplitMix64 step (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): the output that follows state `x`. Passes BigCrush as a counter hash.
uint64_t splitmix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// Output number `index` (0-based) of SplitMix64 started at state `key`.
uint64_t stream_value(uint64_t key, int64_t index) {
  return splitmix64(key + static_cast<uint64_t>(index) * kGolden);
}

/// The ~1% exact zeros: 10 of the 1024 values of the top ten bits (values use the low bits).
bool is_zero_draw(uint64_t bits) { return (bits >> 54) < 10; }

/// `value` negated when `negate` is 1; branch-free because the sign is a coin flip.
double negated_if(double value, uint64_t negate) {
  return std::bit_cast<double>(std::bit_cast<uint64_t>(value) ^ (negate << 63));
}

/// `bits` (below 2^53) as a double, exactly; a signed conversion is one instruction on x86-64.
double exact_double(uint64_t bits) { return static_cast<double>(static_cast<int64_t>(bits)); }

/// 2^(j/256) for j in [0, 256), built once as the product of 2^(2^-k) for the set bits of j; each
/// factor is a chain of correctly rounded square roots, so entries are identical on every machine
/// and within a few ulp.
const std::array<double, 256>& exp2_fractions() {
  static const std::array<double, 256> table = [] {
    std::array<double, 8> roots{};  // roots[k] = 2^(2^-(k+1))
    double root = 2;
    for (double& r : roots) r = root = std::sqrt(root);
    std::array<double, 256> fractions{};
    for (int j = 0; j < 256; ++j) {
      fractions[j] = 1;
      for (int bit = 0; bit < 8; ++bit) fractions[j] *= (j >> bit) & 1 ? roots[7 - bit] : 1.0;
    }
    return fractions;
  }();
  return table;
}

/// 2^t for t = fixed / 2^32 - 64 in (-64, 64) (32.32 fixed point, offset so it is positive):
/// 2^(whole part) exactly, times the table entry 2^(j/256) for the next 8 bits, times e^x for the
/// last 24 bits, 0 <= x < ln 2 / 256, by the Taylor series to x^3 (relative error below 1e-11).
double exp2_fixed(uint64_t fixed) {
  const double x = exact_double(fixed & 0xFFFFFFu) * (kLn2 * 0x1p-32);
  const double series = (1 + x) + (x * x) * (0.5 + x * (1.0 / 6));
  const double scale = std::bit_cast<double>(((fixed >> 32) - 64 + 1023) << 52);
  return exp2_fractions()[(fixed >> 24) & 255] * series * scale;
}

/// exp(-x^2 / 2) for |x| < 9, the unnormalized standard normal density (via 2^t, t > -60, whose
/// positive fixed-point form truncates like a floor).
double gaussian(double x) {
  return exp2_fixed(static_cast<uint64_t>((64 - 0.5 * x * x * kLog2OfE) * 0x1p32));
}

/// Natural log of a positive normal double: exponent * ln 2 + 2 atanh((m - 1) / (m + 1)) with the
/// mantissa m in [sqrt(1/2), sqrt(2)), so |s| <= 0.172 and the series to s^11 errs below 1e-9.
double log_approx(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const double mantissa =
      std::bit_cast<double>((bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52));
  const bool above = mantissa > kSqrt2;
  const double m = above ? mantissa * 0.5 : mantissa;
  const auto exponent = static_cast<int64_t>(bits >> 52) - 1023 + above;
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  const double series =
      1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 * (1.0 / 11)))));
  return static_cast<double>(exponent) * kLn2 + 2 * s * series;
}

/// The ziggurat: layer i spans [0, x_i] between heights f(x_i) and f(x_{i+1}), f(x) =
/// exp(-x^2 / 2), every layer of area V; the base layer is [0, r] under f(r) plus the tail beyond
/// r (zigset in Marsaglia & Tsang). Built once from IEEE operations only.
struct Ziggurat {
  std::array<double, kZigguratLayers + 1> layer_x;  // x_0 = V/f(r) > x_1 = r > ... > x_256 = 0
  std::array<double, kZigguratLayers + 1> layer_f;  // f(x_i)
};

const Ziggurat& ziggurat() {
  static const Ziggurat built = [] {
    Ziggurat z{};
    z.layer_x[0] = kZigguratLayerArea / gaussian(kZigguratTail);
    z.layer_x[1] = kZigguratTail;
    for (int i = 1; i + 1 < kZigguratLayers; ++i) {
      const double height = kZigguratLayerArea / z.layer_x[i] + gaussian(z.layer_x[i]);
      z.layer_x[i + 1] = std::sqrt(-2 * log_approx(height));
    }
    z.layer_x[kZigguratLayers] = 0;
    for (int i = 0; i <= kZigguratLayers; ++i) z.layer_f[i] = gaussian(z.layer_x[i]);
    return z;
  }();
  return built;
}

/// The low 53 bits as a double uniform on the 2^-52 grid in [-1, 1); exact, no rounding.
double uniform_value(uint64_t bits) {
  return exact_double(bits & ((uint64_t{1} << 53) - 1)) * 0x1p-52 - 1;
}

/// log2 of the heavy-tailed magnitude in exp2_fixed's format: 26 random bits scaled to the span
/// 6 log2(10) (u in [-3, 3) decades), offset by 64 - 3 log2(10). The products stay below 2^63.
constexpr uint64_t kHeavySpanFixed = static_cast<uint64_t>(6 * kLog2Of10 * 0x1p32);
constexpr uint64_t kHeavyOffsetFixed = static_cast<uint64_t>((64 - 3 * kLog2Of10) * 0x1p32);

/// Sign from bit 32, magnitude 10^u with u uniform in [-3, 3) from the low 26 bits, all in
/// integer arithmetic up to exp2_fixed (a short dependency chain). The largest u is 3 - 9e-8, so
/// magnitudes stay below 1e3 by far more than the series error: no cap needed.
double heavy_tailed_value(uint64_t bits) {
  const uint64_t octaves = ((bits & 0x3FFFFFFu) * kHeavySpanFixed >> 26) + kHeavyOffsetFixed;
  return negated_if(exp2_fixed(octaves), (bits >> 32) & 1);
}

/// Ziggurat layer (bits 45..52) and the point u * x_layer, u uniform in [0, 1) from bits 0..44.
struct ZigguratDraw {
  uint64_t layer;
  double point;
};
ZigguratDraw ziggurat_draw(const Ziggurat& z, uint64_t bits) {
  const uint64_t layer = (bits >> 45) & (kZigguratLayers - 1);
  return {layer, exact_double(bits & ((uint64_t{1} << 45) - 1)) * 0x1p-45 * z.layer_x[layer]};
}

/// |standard normal| once the first draw fell outside its layer's rectangle (1.2% of draws): in
/// the base layer, Marsaglia's tail method (repeated until it accepts); in a wedge, the density
/// test, and on rejection a fresh draw. Attempt k uses outputs 128 * element + 2k and 2k + 1 of
/// the retry stream, so the value stays a function of the element index. Not inlined: it would
/// only crowd the fast path.
[[gnu::noinline]] double ziggurat_slow_path(const Ziggurat& z, uint64_t retry_key, int64_t element,
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
    const double f_low = z.layer_f[draw.layer], f_high = z.layer_f[draw.layer + 1];
    if (f_low + u2 * (f_high - f_low) < gaussian(draw.point)) return draw.point;
    draw = ziggurat_draw(z, stream_value(retry_key, first_draw + 2 * attempt + 1));
    if (draw.point < z.layer_x[draw.layer + 1]) return draw.point;
  }
  return 0;  // unreachable in practice (kZigguratAttempts)
}

/// `value` rounded to float toward zero, with the last bit set when inexact ("round to odd").
/// A later round-to-nearest to half or bfloat16 (at least 2 bits narrower) then equals one direct
/// rounding of `value` (Boldo & Melquiond, IEEE Trans. Computers 57(4), 2008, Theorem 1).
float round_to_odd_float(double value) {
  const auto nearest = static_cast<float>(value);
  const double widened = nearest;
  const uint32_t inexact = widened != value;
  const uint32_t rounded_away = std::fabs(widened) > std::fabs(value);  // step back toward zero
  return std::bit_cast<float>((std::bit_cast<uint32_t>(nearest) - rounded_away) | inexact);
}

/// Writes element(e) as an `Element` for every e in [begin, end).
template <typename Element, typename Draw>
void store_each(std::byte* out, int64_t begin, int64_t end, Draw element) {
  for (int64_t e = begin; e < end; ++e) {
    const Element value = element(e);
    std::memcpy(out + e * static_cast<int64_t>(sizeof(Element)), &value, sizeof(Element));
  }
}

/// Everything an element depends on besides its index.
struct InputStream {
  DType dtype;
  InputDistribution distribution;
  uint64_t element_key;  // one draw per element: zero decision, sign, value
  uint64_t retry_key;    // further draws of rejected ziggurat samples

  InputStream(DType dtype_in, uint64_t seed, int tensor_index, InputDistribution distribution_in)
      : dtype(dtype_in), distribution(distribution_in) {
    uint64_t key = splitmix64(seed);
    key = splitmix64(key ^ static_cast<uint32_t>(tensor_index));
    element_key = splitmix64(key ^ ((static_cast<uint64_t>(distribution) + 1) << 32));
    retry_key = splitmix64(element_key ^ kGolden);
  }

  /// Writes elements [begin, end) of the tensor whose element 0 is at `out`.
  void fill(std::byte* out, int64_t begin, int64_t end) const {
    switch (distribution) {
      case InputDistribution::uniform:
        return store_as_dtype(out, begin, end, [this](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          return is_zero_draw(bits) ? 0.0 : uniform_value(bits);
        });
      case InputDistribution::normal: {
        const Ziggurat& z = ziggurat();
        return store_as_dtype(out, begin, end, [this, &z](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          const ZigguratDraw draw = ziggurat_draw(z, bits);
          const double magnitude = draw.point < z.layer_x[draw.layer + 1]
                                       ? draw.point
                                       : ziggurat_slow_path(z, retry_key, e, draw);
          return is_zero_draw(bits) ? 0.0 : negated_if(magnitude, (bits >> 53) & 1);
        });
      }
      case InputDistribution::heavy_tailed:
        return store_as_dtype(out, begin, end, [this](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          return is_zero_draw(bits) ? 0.0 : heavy_tailed_value(bits);
        });
    }
  }

  /// Stores value(e), a double, rounded once to the dtype; integer dtypes draw their own values.
  template <typename Value>
  void store_as_dtype(std::byte* out, int64_t begin, int64_t end, Value value) const {
    switch (dtype) {
      case DType::f32:
        return store_each<float>(out, begin, end,
                                 [&](int64_t e) { return static_cast<float>(value(e)); });
      case DType::f64:
        return store_each<double>(out, begin, end, value);
      case DType::f16:
        return store_each<uint16_t>(out, begin, end, [&](int64_t e) {
          return half_from_float(round_to_odd_float(value(e)));
        });
      case DType::bf16:
        return store_each<uint16_t>(out, begin, end, [&](int64_t e) {
          return float_to_bfloat16(round_to_odd_float(value(e)));
        });
      case DType::i32:
        return store_each<int32_t>(out, begin, end, [this](int64_t e) {
          return static_cast<int32_t>(integer_element(e));
        });
      case DType::i64:
        return store_each<int64_t>(out, begin, end,
                                   [this](int64_t e) { return integer_element(e); });
    }
  }

  /// Zero, or sign from bit 32 and magnitude 1..16 from the low four bits, or 1..1000 from the
  /// low 32 bits for heavy_tailed (multiply-shift, bias below 1e-6).
  int64_t integer_element(int64_t e) const {
    const uint64_t bits = stream_value(element_key, e);
    const int64_t magnitude = distribution == InputDistribution::heavy_tailed
                                  ? 1 + static_cast<int64_t>(((bits & 0xFFFFFFFFu) * 1000) >> 32)
                                  : 1 + static_cast<int64_t>(bits & 15);
    const auto negative = static_cast<int64_t>((bits >> 32) & 1);
    return is_zero_draw(bits) ? 0 : (magnitude ^ -negative) + negative;  // negated when negative
  }
};

}  // namespace

std::string to_string(InputDistribution distribution) {
  switch (distribution) {
    case InputDistribution::uniform:
      return "uniform";
    case InputDistribution::normal:
      return "normal";
    case InputDistribution::heavy_tailed:
      return "heavy_tailed";
  }
  return "uniform";
}

InputDistribution parse_input_distribution(const std::string& name) {
  for (auto distribution : {InputDistribution::uniform, InputDistribution::normal,
                            InputDistribution::heavy_tailed}) {
    if (name == to_string(distribution)) return distribution;
  }
  throw Error("unknown input distribution '" + name +
              "' (expected one of uniform, normal, heavy_tailed)");
}

InputDistribution distribution_for_case(uint64_t seed_index) {
  return static_cast<InputDistribution>(seed_index % 3);
}

void fill_input(std::span<std::byte> out, DType dtype, uint64_t seed, int tensor_index,
                InputDistribution distribution, int threads) {
  const auto element_size = static_cast<size_t>(dtype_size(dtype));
  if (out.size() % element_size != 0) {
    throw Error("fill_input: " + std::to_string(out.size()) + " bytes is not a whole number of " +
                to_string(dtype) + " elements");
  }
  const auto elements = static_cast<int64_t>(out.size() / element_size);
  const InputStream stream(dtype, seed, tensor_index, distribution);
  int64_t thread_count = threads;
  if (thread_count <= 0) {
    thread_count = elements < kParallelMinimumElements
                       ? 1
                       : std::max<int64_t>(1, std::thread::hardware_concurrency());
  }
  const int64_t per_thread = (elements + thread_count - 1) / thread_count;
  const int64_t chunk = (per_thread + kChunkAlignmentElements - 1) / kChunkAlignmentElements *
                        kChunkAlignmentElements;
  std::vector<std::jthread> workers;  // joined on scope exit, also when a later start throws
  for (int64_t begin = chunk; begin < elements; begin += chunk) {
    workers.emplace_back([&stream, &out, begin, end = std::min(elements, begin + chunk)] {
      stream.fill(out.data(), begin, end);
    });
  }
  stream.fill(out.data(), 0, std::min(elements, chunk));  // the first chunk on this thread
}

std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index,
                                  InputDistribution distribution) {
  std::vector<std::byte> out(static_cast<size_t>(elements * dtype_size(dtype)));
  fill_input(out, dtype, seed, tensor_index, distribution);
  return out;
}

std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index) {
  return make_input(dtype, elements, seed, tensor_index, InputDistribution::uniform);
}

}  // namespace kforge::worker

#include "worker/host_data.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "common/cpus.h"
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

#include "worker/input_generator.h"  // after the pragma: its functions are compiled under it

namespace kforge::worker {
namespace {

template <typename T>
T load(const std::byte* data, int64_t index) {
  T value;
  std::memcpy(&value, data + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

}  // namespace

uint16_t float_to_half(float value) { return generator::half_from_float(value); }

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

uint16_t float_to_bfloat16(float value) { return generator::bfloat16_from_float(value); }

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
    case DType::b8:
      return DLDataType{kDLUInt, 8, 1};
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
    case DType::b8:
      return load<uint8_t>(data, index);
  }
  return 0.0;
}

// ---- Input generation -------------------------------------------------------------------------

namespace {

using namespace generator;  // NOLINT: the element primitives of input_generator.h

static_assert(static_cast<int>(Element::f32) == static_cast<int>(DType::f32) &&
              static_cast<int>(Element::f64) == static_cast<int>(DType::f64) &&
              static_cast<int>(Element::f16) == static_cast<int>(DType::f16) &&
              static_cast<int>(Element::bf16) == static_cast<int>(DType::bf16) &&
              static_cast<int>(Element::i32) == static_cast<int>(DType::i32) &&
              static_cast<int>(Element::i64) == static_cast<int>(DType::i64) &&
              static_cast<int>(Element::b8) == static_cast<int>(DType::b8));
static_assert(static_cast<int>(Distribution::uniform) ==
                  static_cast<int>(InputDistribution::uniform) &&
              static_cast<int>(Distribution::normal) == static_cast<int>(InputDistribution::normal) &&
              static_cast<int>(Distribution::heavy_tailed) ==
                  static_cast<int>(InputDistribution::heavy_tailed) &&
              static_cast<int>(Distribution::small) == static_cast<int>(InputDistribution::small) &&
              static_cast<int>(Distribution::pareto) ==
                  static_cast<int>(InputDistribution::pareto) &&
              static_cast<int>(Distribution::spike) == static_cast<int>(InputDistribution::spike));
static_assert(static_cast<int>(generator::Remap::every_16th) ==
                  static_cast<int>(InputRemap::every_16th) &&
              static_cast<int>(generator::Remap::half_rows) ==
                  static_cast<int>(InputRemap::half_rows));

/// Below this many elements thread start-up (tens of microseconds) outweighs the work.
constexpr int64_t kParallelMinimumElements = int64_t{1} << 20;
/// Chunk starts are multiples of this, so threads never write the same cache line.
constexpr int64_t kChunkAlignmentElements = 64;

Tables build_tables() {
  Tables t{};
  // 2^(j/256) as the product of 2^(2^-k) for the set bits of j; each factor is a chain of
  // correctly rounded square roots, so entries are identical on every machine and within a few ulp.
  std::array<double, 8> roots{};  // roots[k] = 2^(2^-(k+1))
  double root = 2;
  for (double& r : roots) r = root = std::sqrt(root);
  for (int j = 0; j < 256; ++j) {
    t.exp2_fractions[j] = 1;
    for (int bit = 0; bit < 8; ++bit) t.exp2_fractions[j] *= (j >> bit) & 1 ? roots[7 - bit] : 1.0;
  }
  // The ziggurat: layer i spans [0, x_i] between heights f(x_i) and f(x_{i+1}), f(x) =
  // exp(-x^2 / 2), every layer of area V; the base layer is [0, r] under f(r) plus the tail
  // beyond r (zigset in Marsaglia & Tsang).
  t.layer_x[0] = kZigguratLayerArea / gaussian(t, kZigguratTail);
  t.layer_x[1] = kZigguratTail;
  for (int i = 1; i + 1 < kZigguratLayers; ++i) {
    const double height = kZigguratLayerArea / t.layer_x[i] + gaussian(t, t.layer_x[i]);
    t.layer_x[i + 1] = std::sqrt(-2 * log_approx(height));
  }
  t.layer_x[kZigguratLayers] = 0;
  for (int i = 0; i <= kZigguratLayers; ++i) t.layer_f[i] = gaussian(t, t.layer_x[i]);
  return t;
}

/// Writes element(e) as an `Element` for every e in [begin, end).
template <typename Element, typename Draw>
void store_each(std::byte* out, int64_t begin, int64_t end, Draw element) {
  for (int64_t e = begin; e < end; ++e) {
    const Element value = element(e);
    std::memcpy(out + e * static_cast<int64_t>(sizeof(Element)), &value, sizeof(Element));
  }
}

/// One tensor's stream on the host. The element primitives are input_generator.h's; the loops
/// switch on the distribution and dtype once per chunk, not per element.
struct InputStream {
  DType dtype;
  Stream stream;
  const Tables& tables;

  InputStream(DType dtype_in, uint64_t seed, int tensor_index, InputDistribution distribution)
      : dtype(dtype_in),
        stream(make_stream(seed, tensor_index, static_cast<Distribution>(distribution))),
        tables(generator::tables()) {}

  /// Writes elements [begin, end) of the tensor whose element 0 is at `out`.
  void fill(std::byte* out, int64_t begin, int64_t end) const {
    const Tables& t = tables;
    const uint64_t element_key = stream.element_key;
    switch (stream.distribution) {
      case Distribution::uniform:
        return store_as_dtype(out, begin, end, [element_key](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          return is_zero_draw(bits) ? 0.0 : uniform_value(bits);
        });
      case Distribution::normal:
        return store_as_dtype(out, begin, end, [this, &t, element_key](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          const ZigguratDraw draw = ziggurat_draw(t, bits);
          const double magnitude = draw.point < t.layer_x[draw.layer + 1]
                                       ? draw.point
                                       : ziggurat_slow_path(t, stream.retry_key, e, draw);
          return is_zero_draw(bits) ? 0.0 : negated_if(magnitude, (bits >> 53) & 1);
        });
      case Distribution::heavy_tailed:
        return store_as_dtype(out, begin, end, [&t, element_key](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          return is_zero_draw(bits) ? 0.0 : heavy_tailed_value(t, bits);
        });
      case Distribution::small:
        return store_as_dtype(out, begin, end, [element_key](int64_t e) {
          const uint64_t bits = stream_value(element_key, e);
          return is_zero_draw(bits) ? 0.0 : uniform_value(bits) * 0x1p-10;
        });
      case Distribution::pareto:
      case Distribution::spike:
        return store_as_dtype(out, begin, end,
                              [this, &t](int64_t e) { return real_element(t, stream, e); });
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
          return bfloat16_from_float(round_to_odd_float(value(e)));
        });
      case DType::i32:
        return store_each<int32_t>(out, begin, end, [this](int64_t e) {
          return static_cast<int32_t>(integer_element(stream, e));
        });
      case DType::i64:
        return store_each<int64_t>(out, begin, end,
                                   [this](int64_t e) { return integer_element(stream, e); });
      case DType::b8:
        return store_each<uint8_t>(out, begin, end,
                                   [this](int64_t e) { return boolean_element(stream, e); });
    }
  }
};

}  // namespace

const generator::Tables& generator::tables() {
  static const Tables built = build_tables();
  return built;
}

std::string to_string(InputDistribution distribution) {
  switch (distribution) {
    case InputDistribution::uniform:
      return "uniform";
    case InputDistribution::normal:
      return "normal";
    case InputDistribution::heavy_tailed:
      return "heavy_tailed";
    case InputDistribution::small:
      return "small";
    case InputDistribution::pareto:
      return "pareto";
    case InputDistribution::spike:
      return "spike";
  }
  return "uniform";
}

InputDistribution parse_input_distribution(const std::string& name) {
  for (auto distribution : {InputDistribution::uniform, InputDistribution::normal,
                            InputDistribution::heavy_tailed, InputDistribution::small,
                            InputDistribution::pareto, InputDistribution::spike}) {
    if (name == to_string(distribution)) return distribution;
  }
  throw Error("unknown input distribution '" + name +
              "' (expected one of uniform, normal, heavy_tailed, small, pareto, spike)");
}

std::string to_string(InputRemap remap) {
  switch (remap) {
    case InputRemap::none:
      return "none";
    case InputRemap::every_16th:
      return "every_16th";
    case InputRemap::half_rows:
      return "half_rows";
  }
  return "none";
}

InputRemap parse_input_remap(const std::string& name) {
  for (auto remap : {InputRemap::none, InputRemap::every_16th, InputRemap::half_rows}) {
    if (name == to_string(remap)) return remap;
  }
  throw Error("unknown input remap '" + name + "' (expected one of none, every_16th, half_rows)");
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
                       : usable_cpus();
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

void fill_input_remapped(std::span<std::byte> out, DType dtype, uint64_t seed, int tensor_index,
                         InputDistribution distribution, InputRemap remap, int64_t rows) {
  if (remap == InputRemap::none) return fill_input(out, dtype, seed, tensor_index, distribution);
  const auto element_size = static_cast<size_t>(dtype_size(dtype));
  if (out.size() % element_size != 0) {
    throw Error("fill_input_remapped: " + std::to_string(out.size()) +
                " bytes is not a whole number of " + to_string(dtype) + " elements");
  }
  const auto elements = static_cast<int64_t>(out.size() / element_size);
  if (remap == InputRemap::half_rows && elements > 0 && (rows < 1 || elements % rows != 0)) {
    throw Error("fill_input_remapped: half_rows needs a row count that divides the " +
                std::to_string(elements) + " elements, got " + std::to_string(rows));
  }
  const generator::Stream stream = generator::make_stream(
      seed, tensor_index, static_cast<generator::Distribution>(distribution));
  const generator::Tables& t = generator::tables();
  for (int64_t e = 0; e < elements; ++e) {
    generator::store_element(
        t, stream, static_cast<generator::Element>(dtype),
        generator::remapped_index(static_cast<int>(remap), rows, elements, e),
        reinterpret_cast<unsigned char*>(out.data()) + e * static_cast<int64_t>(element_size));
  }
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

#include "worker/host_data.h"

#include <bit>
#include <cstring>
#include <random>

namespace kforge::worker {
namespace {

/// SplitMix64 finalizer (Steele, Lea, Flood 2014): decorrelates nearby seeds before they reach
/// the Mersenne Twister, whose seeding of consecutive integers gives correlated first draws.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

template <typename T>
void store(std::vector<std::byte>& out, int64_t index, T value) {
  std::memcpy(out.data() + index * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

template <typename T>
T load(const std::byte* data, int64_t index) {
  T value;
  std::memcpy(&value, data + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

}  // namespace

uint16_t float_to_half(float value) {
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
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1FFFu;
  // Round to nearest even; a carry into the exponent correctly rounds up to the next binade/inf.
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

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

std::vector<std::byte> make_input(DType dtype, int64_t elements, uint64_t seed, int tensor_index) {
  std::mt19937_64 engine(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(tensor_index) + 1)));
  std::vector<std::byte> out(static_cast<size_t>(elements * dtype_size(dtype)));
  // Distributions are implementation-defined in libstdc++ vs libc++; a hand-rolled mapping of the
  // raw 64-bit draws keeps the bytes identical across standard libraries.
  auto unit = [&engine] {  // uniform in [-1, 1], 53 random bits
    return static_cast<double>(engine() >> 11) * (2.0 / 9007199254740991.0) - 1.0;
  };
  auto small_int = [&engine] { return static_cast<int64_t>(engine() % 33) - 16; };
  for (int64_t i = 0; i < elements; ++i) {
    switch (dtype) {
      case DType::f32:
        store(out, i, static_cast<float>(unit()));
        break;
      case DType::f64:
        store(out, i, unit());
        break;
      case DType::f16:
        store(out, i, float_to_half(static_cast<float>(unit())));
        break;
      case DType::bf16:
        store(out, i, float_to_bfloat16(static_cast<float>(unit())));
        break;
      case DType::i32:
        store(out, i, static_cast<int32_t>(small_int()));
        break;
      case DType::i64:
        store(out, i, small_int());
        break;
    }
  }
  return out;
}

}  // namespace kforge::worker

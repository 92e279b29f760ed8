#include "worker/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "worker/host_data.h"

namespace kforge::worker {
namespace {

bool element_passes(double got, double expected, const Tolerance& tolerance) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - expected) <= tolerance.atol + tolerance.rtol * std::fabs(expected);
}

}  // namespace

Comparison compare_elements(DType dtype, std::span<const std::byte> got,
                            std::span<const std::byte> expected, int64_t elements,
                            const Tolerance& tolerance) {
  Comparison result;
  const double infinity = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < elements; ++i) {
    const double g = element_as_double(dtype, got.data(), i);
    const double e = element_as_double(dtype, expected.data(), i);
    if (std::isfinite(e)) {
      const double abs_error = std::isfinite(g) ? std::fabs(g - e) : infinity;
      result.max_abs_error = std::max(result.max_abs_error, abs_error);
      if (e != 0.0) result.max_rel_error = std::max(result.max_rel_error, abs_error / std::fabs(e));
    }
    if (result.passed && !element_passes(g, e, tolerance)) {
      result.passed = false;
      result.first_failure = i;
      result.got = g;
      result.expected = e;
    }
  }
  return result;
}

std::optional<int64_t> first_changed_element(std::span<const std::byte> before,
                                             std::span<const std::byte> after, int element_bytes) {
  if (before.size() == after.size() &&
      std::memcmp(before.data(), after.data(), before.size()) == 0) {
    return std::nullopt;
  }
  const size_t common = std::min(before.size(), after.size());
  for (size_t i = 0; i < common; ++i) {
    if (before[i] != after[i]) return static_cast<int64_t>(i) / element_bytes;
  }
  return static_cast<int64_t>(common) / element_bytes;
}

std::string format_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d) text += ", ";
    text += std::to_string(index[d]);
  }
  return text + "]";
}

std::string format_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

}  // namespace kforge::worker

#include "evaluation/comparison.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "common/cpus.h"
#include "common/error.h"
#include "worker/host_data.h"

namespace kforge::evaluation {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Work split: a chunk (4 MiB of f32 per buffer) is big enough to amortize the thread hand-off
// and small enough to balance two to a hundred cores; chunk boundaries never depend on the
// thread count, which keeps the floating-point sums reproducible.
constexpr int64_t kChunkElements = int64_t{1} << 20;
// A block is checked on the branch-free path first and redone element by element only if some
// element in it may fail; 2048 keeps the redo cheap and the per-block overhead small.
constexpr int64_t kBlockElements = 2048;
// Independent accumulators per block so the compiler can vectorize the sums without reassociating.
constexpr int kLanes = 8;

/// Sums and extremes over a range of elements; combined in index order.
struct Totals {
  double sum_sq_expected = 0.0;  // of finite expected values, times scale_expected^2
  double sum_sq_error = 0.0;     // of |got - expected| there, times scale_error^2
  double max_abs_expected = 0.0;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  int64_t finite_expected = 0;
  int64_t mismatched = 0;
  int64_t nonfinite_mismatches = 0;
  int64_t first_failure = -1;

  void add(const Totals& later) {
    sum_sq_expected += later.sum_sq_expected;
    sum_sq_error += later.sum_sq_error;
    max_abs_expected = std::max(max_abs_expected, later.max_abs_expected);
    max_abs_error = std::max(max_abs_error, later.max_abs_error);
    max_rel_error = std::max(max_rel_error, later.max_rel_error);
    finite_expected += later.finite_expected;
    mismatched += later.mismatched;
    nonfinite_mismatches += later.nonfinite_mismatches;
    if (first_failure < 0) first_failure = later.first_failure;
  }
};

/// The rule's inputs, plus multipliers applied before squaring (1 unless the squares of f64
/// values overflow or underflow; see rescale_if_needed).
struct Rule {
  ToleranceSpec tolerance;
  double scale_expected = 1.0;
  double scale_error = 1.0;
};

/// Decodes one stored element to double. `Raw` is the stored type; integers compare raw first.
template <typename RawType>
struct CastDecoder {
  using Raw = RawType;
  static constexpr bool kInteger = std::is_integral_v<RawType>;
  double operator()(Raw raw) const { return static_cast<double>(raw); }
};

/// f16/bf16: a 64K-entry table beats bit manipulation in the hot loop.
struct TableDecoder {
  using Raw = uint16_t;
  static constexpr bool kInteger = false;
  const float* table;
  double operator()(Raw raw) const { return table[raw]; }
};

std::vector<float> all_values(float (*to_float)(uint16_t)) {
  std::vector<float> values(65536);
  for (uint32_t bits = 0; bits < 65536; ++bits) values[bits] = to_float(bits);
  return values;
}

const float* half_table() {
  static const std::vector<float> table = all_values(worker::half_to_float);
  return table.data();
}

const float* bfloat16_table() {
  static const std::vector<float> table = all_values(worker::bfloat16_to_float);
  return table.data();
}

/// max by value. std::max returns a reference, which keeps GCC from vectorizing the select.
/// GCC vectorizes it only under -fno-trapping-math (clang always does): build this file with
/// that flag for about twice the speed; the results are the same either way.
inline double larger(double a, double b) { return b > a ? b : a; }

template <typename Raw>
Raw load(const std::byte* data, int64_t index) {
  Raw raw;
  std::memcpy(&raw, data + index * static_cast<int64_t>(sizeof(Raw)), sizeof(Raw));
  return raw;
}

/// The per-element rule of compare_output. Integers that differ pass only under a non-zero
/// bound: with an exact tolerance, two i64 values above 2^53 that round to the same double must
/// still fail.
bool element_passes(double got, double expected, bool integer, bool raw_equal,
                    const ToleranceSpec& tolerance) {
  if (raw_equal) return true;
  const double allowed = tolerance.atol + tolerance.rtol * std::fabs(expected);
  if (integer) return allowed > 0 && std::fabs(got - expected) <= allowed;
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - expected) <= allowed;
}

/// Element by element, exactly as the rule says; used for tails and for blocks that may fail.
/// Accumulates in a local: `totals` may alias the std::byte buffers as far as the compiler
/// knows, and updating it in place would force a store and reload on every element.
template <typename Decoder>
void check_exactly(const std::byte* got, const std::byte* expected, int64_t begin, int64_t end,
                   const Rule& rule, Decoder decode, Totals& totals) {
  using Raw = typename Decoder::Raw;
  Totals range;
  for (int64_t i = begin; i < end; ++i) {
    const Raw got_raw = load<Raw>(got, i), expected_raw = load<Raw>(expected, i);
    const double g = decode(got_raw), e = decode(expected_raw);
    const bool raw_equal = Decoder::kInteger && got_raw == expected_raw;
    if (!element_passes(g, e, Decoder::kInteger, raw_equal, rule.tolerance)) {
      ++range.mismatched;
      if (!std::isfinite(g) || !std::isfinite(e)) ++range.nonfinite_mismatches;
      if (range.first_failure < 0) range.first_failure = i;
    }
    if (!std::isfinite(e)) continue;
    const double magnitude = std::fabs(e);
    const double error = std::isfinite(g) ? std::fabs(g - e) : kInfinity;
    const double scaled_expected = magnitude * rule.scale_expected;
    const double scaled_error = error * rule.scale_error;
    ++range.finite_expected;
    range.sum_sq_expected += scaled_expected * scaled_expected;
    range.sum_sq_error += scaled_error * scaled_error;
    range.max_abs_expected = std::max(range.max_abs_expected, magnitude);
    range.max_abs_error = std::max(range.max_abs_error, error);
    if (magnitude > 0) range.max_rel_error = std::max(range.max_rel_error, error / magnitude);
  }
  totals.add(range);
}

/// Branch-free pass over one full block starting at `begin`, written so that the compiler can
/// vectorize it. Returns false, leaving `totals` untouched, when some element might fail; the
/// caller then redoes the block with check_exactly. A NaN or infinity anywhere needs no test of
/// its own: it makes a sum of squares non-finite.
template <typename Decoder>
bool check_clean_block(const std::byte* got, const std::byte* expected, int64_t begin,
                       const Rule& rule, Decoder decode, Totals& totals) {
  using Raw = typename Decoder::Raw;
  const double atol = rule.tolerance.atol, rtol = rule.tolerance.rtol;
  double sq_expected[kLanes] = {}, sq_error[kLanes] = {}, max_expected[kLanes] = {};
  double max_error[kLanes] = {}, max_rel[kLanes] = {};
  double excess[kLanes];  // max of error - allowed; > 0 means some element fails
  std::fill(excess, excess + kLanes, -kInfinity);
  int64_t raw_differences = 0;
  for (int64_t i = begin; i < begin + kBlockElements; i += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) {
      const Raw got_raw = load<Raw>(got, i + lane), expected_raw = load<Raw>(expected, i + lane);
      const double g = decode(got_raw), e = decode(expected_raw);
      const double magnitude = std::fabs(e), error = std::fabs(g - e);
      if constexpr (Decoder::kInteger) raw_differences += got_raw != expected_raw;
      excess[lane] = larger(excess[lane], error - (atol + rtol * magnitude));
      const double scaled_expected = magnitude * rule.scale_expected;
      const double scaled_error = error * rule.scale_error;
      sq_expected[lane] += scaled_expected * scaled_expected;
      sq_error[lane] += scaled_error * scaled_error;
      max_expected[lane] = larger(max_expected[lane], magnitude);
      max_error[lane] = larger(max_error[lane], error);
      const double rel = error / magnitude;  // unconditional, so no division is speculated
      max_rel[lane] = larger(max_rel[lane], magnitude > 0 ? rel : 0.0);
    }
  }
  Totals block;
  bool suspect = raw_differences > 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    suspect |= !Decoder::kInteger && excess[lane] > 0;
    block.sum_sq_expected += sq_expected[lane];
    block.sum_sq_error += sq_error[lane];
    block.max_abs_expected = std::max(block.max_abs_expected, max_expected[lane]);
    block.max_abs_error = std::max(block.max_abs_error, max_error[lane]);
    block.max_rel_error = std::max(block.max_rel_error, max_rel[lane]);
  }
  if (suspect || !std::isfinite(block.sum_sq_expected) || !std::isfinite(block.sum_sq_error)) {
    return false;
  }
  block.finite_expected = kBlockElements;
  totals.add(block);
  return true;
}

template <typename Decoder>
Totals check_range(const std::byte* got, const std::byte* expected, int64_t begin, int64_t end,
                   const Rule& rule, Decoder decode) {
  Totals totals;
  int64_t i = begin;
  // After a block that needed the exact pass, the next one goes straight to it: an output left
  // all NaN (never written) then costs one pass instead of two.
  bool previous_suspect = false;
  for (; i + kBlockElements <= end; i += kBlockElements) {
    const bool clean =
        !previous_suspect && check_clean_block(got, expected, i, rule, decode, totals);
    if (!clean) {
      const int64_t mismatched_before = totals.mismatched;
      check_exactly(got, expected, i, i + kBlockElements, rule, decode, totals);
      previous_suspect = totals.mismatched > mismatched_before;
    } else {
      previous_suspect = false;
    }
  }
  check_exactly(got, expected, i, end, rule, decode, totals);
  return totals;
}

/// Splits [0, elements) into fixed chunks, checks them on usable_cpus() threads and
/// combines the per-chunk totals in index order (so the first failure is the smallest index).
template <typename Decoder>
Totals check_parallel(const std::byte* got, const std::byte* expected, int64_t elements,
                      const Rule& rule, Decoder decode) {
  const int64_t chunks = (elements + kChunkElements - 1) / kChunkElements;
  std::vector<Totals> per_chunk(static_cast<size_t>(chunks));
  std::atomic<int64_t> next_chunk{0};
  auto work = [&] {
    for (int64_t c = next_chunk++; c < chunks; c = next_chunk++) {
      const int64_t begin = c * kChunkElements;
      per_chunk[c] = check_range(got, expected, begin, std::min(elements, begin + kChunkElements),
                                 rule, decode);
    }
  };
  const int64_t threads =
      std::min<int64_t>(chunks, usable_cpus());
  {
    std::vector<std::jthread> helpers;  // joined when this scope ends, even on an exception
    for (int64_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
  }
  Totals totals;
  for (const Totals& chunk : per_chunk) totals.add(chunk);
  return totals;
}

Totals check_any(DType dtype, const std::byte* got, const std::byte* expected, int64_t elements,
                 const Rule& rule) {
  switch (dtype) {
    case DType::f32:
      return check_parallel(got, expected, elements, rule, CastDecoder<float>{});
    case DType::f64:
      return check_parallel(got, expected, elements, rule, CastDecoder<double>{});
    case DType::f16:
      return check_parallel(got, expected, elements, rule, TableDecoder{half_table()});
    case DType::bf16:
      return check_parallel(got, expected, elements, rule, TableDecoder{bfloat16_table()});
    case DType::i32:
      return check_parallel(got, expected, elements, rule, CastDecoder<int32_t>{});
    case DType::i64:
      return check_parallel(got, expected, elements, rule, CastDecoder<int64_t>{});
    case DType::b8:
      return check_parallel(got, expected, elements, rule, CastDecoder<uint8_t>{});
  }
  throw Error("compare_output: unknown dtype");
}

/// Squares of f64 values beyond ~1e154 overflow and below ~1e-162 underflow; when a sum did,
/// redo the pass with each quantity divided by its maximum (a power of two, so exactly).
void rescale_if_needed(DType dtype, const std::byte* got, const std::byte* expected,
                       int64_t elements, Rule& rule, Totals& totals) {
  auto broken = [](double sum, double max) {
    return std::isfinite(max) && (!std::isfinite(sum) || (sum == 0 && max > 0));
  };
  if (!broken(totals.sum_sq_expected, totals.max_abs_expected) &&
      !broken(totals.sum_sq_error, totals.max_abs_error)) {
    return;
  }
  // 2^-exponent of the maximum; capped so that the scale itself stays finite for subnormals.
  auto inverse_scale = [](double max) {
    return max > 0 ? std::ldexp(1.0, std::clamp(-std::ilogb(max), -1000, 1000)) : 1.0;
  };
  rule.scale_expected = inverse_scale(totals.max_abs_expected);
  if (std::isfinite(totals.max_abs_error)) rule.scale_error = inverse_scale(totals.max_abs_error);
  totals = check_any(dtype, got, expected, elements, rule);
}

/// The norm-wise half of the rule (see compare_output), from the combined totals.
struct NormCheck {
  double normalized_error = 0.0;  // ||d||_2 / ||e||_2
  double rms_error = 0.0;         // ||d||_2 / sqrt(n)
  double rms_allowed = 0.0;       // max_normalized_error * ||e||_2 / sqrt(n) + atol
  bool passes = true;
};

NormCheck check_norm(const Totals& totals, const Rule& rule) {
  const ToleranceSpec& t = rule.tolerance;
  const double root_n = std::sqrt(static_cast<double>(totals.finite_expected));
  const double norm_expected = std::sqrt(totals.sum_sq_expected) / rule.scale_expected;
  const double norm_error = std::sqrt(totals.sum_sq_error) / rule.scale_error;
  NormCheck check;
  if (totals.finite_expected == 0) return check;
  check.rms_error = norm_error / root_n;
  check.rms_allowed = t.max_normalized_error * norm_expected / root_n + t.atol;
  if (totals.sum_sq_expected > 0) {
    // The ratio of the scaled sums, so that norms beyond DBL_MAX still give a ratio.
    check.normalized_error = std::sqrt(totals.sum_sq_error / totals.sum_sq_expected) *
                             (rule.scale_expected / rule.scale_error);
    check.passes =
        check.normalized_error <= t.max_normalized_error + t.atol * root_n / norm_expected;
  } else {
    check.normalized_error = norm_error > 0 ? kInfinity : 0.0;
    check.passes = norm_error <= t.atol * root_n;
  }
  return check;
}

/// An element as text straight from the buffer: exact for integers, shortest for floats.
std::string element_text(DType dtype, const std::byte* data, int64_t index) {
  if (dtype == DType::i32) return std::to_string(load<int32_t>(data, index));
  if (dtype == DType::i64) return std::to_string(load<int64_t>(data, index));
  if (dtype == DType::b8) return std::to_string(load<uint8_t>(data, index));
  return format_value(worker::element_as_double(dtype, data, index), dtype);
}

std::string describe_element_failure(DType dtype, const std::byte* got, const std::byte* expected,
                                     const std::vector<int64_t>& shape, const ToleranceSpec& t,
                                     const Totals& totals, int64_t elements) {
  const int64_t i = totals.first_failure;
  const double g = worker::element_as_double(dtype, got, i);
  const double e = worker::element_as_double(dtype, expected, i);
  std::string text = "element " + format_index(i, shape) + " is " + element_text(dtype, got, i) +
                     ", expected " + element_text(dtype, expected, i) + ": ";
  if (std::isnan(e)) {
    text += "the reference is NaN here, so the output must be NaN too";
  } else if (std::isinf(e)) {
    text += "infinities must match exactly";
  } else if (std::isnan(g)) {
    text += "NaN where the reference has a number; NaN usually means the kernel never wrote this "
            "element (outputs are filled with NaN before each call)";
  } else if (std::isinf(g)) {
    text += "an infinity where the reference is finite";
  } else if (!is_floating(dtype) && t.atol == 0 && t.rtol == 0) {
    text += "integer outputs must match exactly";
  } else {
    const double allowed = t.atol + t.rtol * std::fabs(e);
    text += "difference " + format_value(std::fabs(g - e)) + " exceeds the allowed " +
            format_value(allowed) + " (atol " + format_value(t.atol) + " + rtol " +
            format_value(t.rtol) + " x |expected|)";
  }
  return text + "; " + std::to_string(totals.mismatched) + " of " + std::to_string(elements) +
         " elements are wrong";
}

/// Product of the dimensions, refusing negative ones and sizes past int64 bytes.
int64_t checked_element_count(const std::vector<int64_t>& shape, int element_bytes) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw Error("compare_output: a shape dimension is " + std::to_string(dim) +
                  "; dimensions must be >= 0");
    }
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / element_bytes / dim) {
      throw Error("compare_output: the shape needs more than 2^63 bytes");
    }
    count *= dim;
  }
  return count;
}

void check_tolerance(const ToleranceSpec& t) {
  // Written as !(x >= 0) so that NaN is refused too.
  if (!(t.rtol >= 0) || !(t.atol >= 0) || !(t.max_normalized_error >= 0)) {
    throw Error("compare_output: tolerance must be non-negative numbers, got rtol " +
                format_value(t.rtol) + ", atol " + format_value(t.atol) +
                ", max_normalized_error " + format_value(t.max_normalized_error));
  }
}

}  // namespace

ToleranceSpec default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return {1e-9, 1e-12, 1e-10};
    case DType::f32:
      return {1e-4, 1e-5, 2e-5};
    case DType::f16:
    case DType::bf16:
      return {1e-2, 1e-2, 5e-3};
    case DType::i32:
    case DType::i64:
    case DType::b8:
      return {0.0, 0.0, 0.0};
  }
  throw Error("default_tolerance: unknown dtype");
}

ToleranceSpec tolerance_with(DType dtype, double rtol, double atol) {
  const ToleranceSpec base = default_tolerance(dtype);
  const double norm_per_rtol = base.rtol > 0 ? base.max_normalized_error / base.rtol : 1.0;
  return {rtol, atol, rtol * norm_per_rtol};
}

OutputComparison compare_output(DType dtype, std::span<const std::byte> got,
                                std::span<const std::byte> expected,
                                const std::vector<int64_t>& shape, const ToleranceSpec& tolerance) {
  check_tolerance(tolerance);
  const int64_t elements = checked_element_count(shape, dtype_size(dtype));
  const auto needed_bytes = static_cast<size_t>(elements * dtype_size(dtype));
  if (got.size() < needed_bytes || expected.size() < needed_bytes) {
    throw Error("compare_output: a " + to_string(dtype) + " tensor of " +
                std::to_string(elements) + " elements needs " + std::to_string(needed_bytes) +
                " bytes, but got holds " + std::to_string(got.size()) + " and expected " +
                std::to_string(expected.size()));
  }
  Rule rule{tolerance};
  Totals totals = check_any(dtype, got.data(), expected.data(), elements, rule);
  rescale_if_needed(dtype, got.data(), expected.data(), elements, rule, totals);

  OutputComparison result;
  result.first_failure = totals.first_failure;
  result.max_abs_error = totals.max_abs_error;
  result.max_rel_error = totals.max_rel_error;
  result.mismatched_elements = totals.mismatched;
  result.nonfinite_mismatches = totals.nonfinite_mismatches;
  const NormCheck norm = check_norm(totals, rule);
  result.normalized_error = norm.normalized_error;
  result.norm_passed = norm.passes;
  if (totals.first_failure >= 0) {
    result.passed = false;
    result.failure = describe_element_failure(dtype, got.data(), expected.data(), shape, tolerance,
                                              totals, elements);
  } else if (!norm.passes) {
    result.passed = false;
    result.failure = "every element is within tolerance but the error is systematic: "
                     "||got - expected||_2 / ||expected||_2 = " +
                     format_value(norm.normalized_error) + " exceeds max_normalized_error " +
                     format_value(tolerance.max_normalized_error) + " (RMS error " +
                     format_value(norm.rms_error) + ", allowed " + format_value(norm.rms_allowed) +
                     " = max_normalized_error x RMS(expected) + atol)";
  }
  return result;
}

bool bitwise_equal(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

std::optional<int64_t> first_changed_element(std::span<const std::byte> before,
                                             std::span<const std::byte> after, int element_bytes) {
  if (bitwise_equal(before, after)) return std::nullopt;
  const size_t common = std::min(before.size(), after.size());
  const auto differs = std::mismatch(before.begin(), before.begin() + common, after.begin());
  return static_cast<int64_t>(differs.first - before.begin()) / element_bytes;
}

std::string format_value(double value, DType dtype) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const bool narrow = dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
  const auto [end, error] = narrow ? std::to_chars(buffer, buffer + sizeof buffer,
                                                   static_cast<float>(value))
                                   : std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

}  // namespace kforge::evaluation

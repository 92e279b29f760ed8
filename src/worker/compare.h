// Element-wise comparison of a candidate's outputs with the reference's, and the bitwise check
// that a candidate left its inputs unchanged. Pure host code, shared by every backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "task/task.h"

namespace kforge::worker {

/// Outcome of comparing one output tensor.
struct Comparison {
  bool passed = true;
  int64_t first_failure = -1;  // flat element index of the first failing element, -1 if none
  double got = 0.0;            // candidate's value there
  double expected = 0.0;       // reference's value there
  double max_abs_error = 0.0;  // max |got - expected| over all elements (inf if a value that
                               // should be finite is not)
  double max_rel_error = 0.0;  // max |got - expected| / |expected| over elements with expected != 0
};

/// Compares `elements` values of `dtype` in `got` against `expected`. An element passes when
///   expected is NaN:       got is NaN;
///   expected is +-inf:     got equals it;
///   otherwise:             got is finite and |got - expected| <= atol + rtol * |expected|.
/// So NaN where the reference has a number (e.g. an unwritten, poisoned element) always fails.
/// Both spans hold at least elements * dtype_size(dtype) bytes.
Comparison compare_elements(DType dtype, std::span<const std::byte> got,
                            std::span<const std::byte> expected, int64_t elements,
                            const Tolerance& tolerance);

/// Flat index of the first element of `element_bytes` bytes that differs bitwise between
/// `before` and `after` (same size), or nullopt if identical.
std::optional<int64_t> first_changed_element(std::span<const std::byte> before,
                                             std::span<const std::byte> after, int element_bytes);

/// Row-major multi-dimensional index of flat element `flat` in `shape`, as "[i, j, k]".
std::string format_index(int64_t flat, const std::vector<int64_t>& shape);

/// A value for messages: shortest round-trip text, "nan", "inf", "-inf".
std::string format_value(double value);

}  // namespace kforge::worker

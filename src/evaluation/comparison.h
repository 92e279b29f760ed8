// Judging a candidate's outputs against the reference's: the per-element tolerance rule, a
// norm-wise bound that stops a kernel from spending the tolerance systematically, and the
// bitwise check that inputs were left unchanged. (self_test.h uses it to prove that a task's
// check can tell degenerate outputs from the right answer.)
//
// Runs in the trusted orchestrator on host bytes that workers send back: densely packed,
// row-major, little-endian elements of the tensor's dtype. Pure host code; no device, no task file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/task.h"

namespace kforge::evaluation {

/// How far a candidate's output may be from the reference's (rule: see compare_output).
/// Independent of the task's Tolerance {rtol, atol}, which the caller maps onto rtol/atol.
struct ToleranceSpec {
  double rtol = 0.0;                  // per element, a multiple of |expected|
  double atol = 0.0;                  // per element, in the output's own units
  double max_normalized_error = 0.0;  // bound on ||got - expected||_2 / ||expected||_2
};

/// Defaults per output dtype (rtol, atol, max_normalized_error):
///   f64 {1e-9, 1e-12, 1e-10}, f32 {1e-4, 1e-5, 2e-5}, f16 and bf16 {1e-2, 1e-2, 5e-3},
///   i32 and i64 {0, 0, 0} (exact).
/// rtol leaves room for a reordered reduction (f32: ~840 ulps; f16: ~10 ulps; bf16: ~1 ulp,
/// since a bf16 result is already rounded to 8 bits); the norm bound is a fraction of rtol, so a
/// kernel may have a few elements near the per-element limit but not all of them.
ToleranceSpec default_tolerance(DType dtype);

/// The default for `dtype` with a task's own rtol and atol. max_normalized_error is scaled by
/// the same factor as rtol, so a task that loosens rtol tenfold loosens the norm-wise bound
/// tenfold too (keeping it would make the looser rtol meaningless on every element at once);
/// for integer dtypes, whose default is exact, it is set to rtol.
ToleranceSpec tolerance_with(DType dtype, double rtol, double atol);

/// Outcome of comparing one output tensor.
struct OutputComparison {
  bool passed = true;
  /// Empty when passed; otherwise one sentence for the candidate's author: the first failing
  /// element as "[i, j]", got, expected and the allowed difference, or the systematic-error bound.
  std::string failure;
  int64_t first_failure = -1;    // flat index of the first failing element; -1 if none
                                 // (also when only the norm-wise bound failed)
  double max_abs_error = 0.0;    // max |got - expected| over finite expected elements;
                                 // inf where got is not finite there
  double max_rel_error = 0.0;    // max |got - expected| / |expected| over finite, non-zero expected
  double normalized_error = 0.0; // ||got - expected||_2 / ||expected||_2 over finite expected
                                 // elements; 0 if both norms are 0, inf if only ||expected|| is
  int64_t mismatched_elements = 0;   // elements failing the per-element rule
  int64_t nonfinite_mismatches = 0;  // of those, the ones where got or expected is NaN or inf
  bool norm_passed = true;           // the norm-wise bound held (whatever the elements did)
};

/// Compares the first element_count(shape) elements of `got` with `expected`, both of `dtype`.
///
/// Per element (e = expected, g = got, both widened to double):
///   e is NaN:            g must be NaN;
///   e is +inf or -inf:   g must be the same infinity;
///   e is finite:         g must be finite and |g - e| <= atol + rtol * |e|.
/// Integer dtypes compare the stored integers: equal passes; otherwise the same bound applies,
/// so the exact default {0, 0} means equal or fail.
/// Norm-wise, over the n finite expected elements (d = g - e):
///   ||d||_2 <= max_normalized_error * ||e||_2 + atol * sqrt(n),
/// i.e. RMS error <= max_normalized_error * RMS(expected) + atol. The atol term keeps outputs
/// whose values are all below atol (where only the absolute bound means anything) from failing
/// on a ratio of tiny numbers; elsewhere it catches a kernel that is off by, say, 0.9 * rtol on
/// every element, which each element alone would allow.
///
/// Spans longer than the shape needs are fine (the tail is ignored). Runs on
/// usable_cpus() threads (common/cpus.h) over fixed-size chunks, so every field of the
/// result (sums included) is identical whatever the number of threads.
/// Throws Error if a span is shorter than the shape needs, a dimension is negative, or a
/// tolerance is negative or NaN.
OutputComparison compare_output(DType dtype, std::span<const std::byte> got,
                                std::span<const std::byte> expected,
                                const std::vector<int64_t>& shape, const ToleranceSpec& tolerance);

/// True when `a` and `b` have the same size and the same bytes.
bool bitwise_equal(std::span<const std::byte> a, std::span<const std::byte> b);

/// Flat index of the first element of `element_bytes` bytes that differs bitwise between
/// `before` and `after`, or nullopt if they are identical. If one is a prefix of the other, the
/// element where the shorter one ends.
std::optional<int64_t> first_changed_element(std::span<const std::byte> before,
                                             std::span<const std::byte> after, int element_bytes);


/// A value for messages: "nan", "inf", "-inf", or the shortest text that reads back as the
/// same value of `dtype` (so an f32 0.1 prints as "0.1", not "0.10000000149011612").
std::string format_value(double value, DType dtype = DType::f64);

}  // namespace kforge::evaluation

#include "evaluation/precision.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "common/error.h"

namespace kforge::evaluation {
namespace {

float float_at(std::span<const std::byte> bytes, int64_t index) {
  float value;
  std::memcpy(&value, bytes.data() + index * static_cast<int64_t>(sizeof(float)), sizeof(float));
  return value;
}

}  // namespace

std::string format_ratio(double ratio) {
  return std::isinf(ratio) ? std::string("many times") : fmt::format("{:.0f}x", ratio);
}

PrecisionCheck check_precision(std::span<const std::byte> got,
                               std::span<const std::byte> reference,
                               std::span<const std::byte> model, int64_t elements,
                               double max_ratio) {
  const auto needed = static_cast<size_t>(elements) * sizeof(float);
  if (elements < 0 || got.size() < needed || reference.size() < needed || model.size() < needed) {
    throw Error("check_precision: a span is shorter than " + std::to_string(elements) +
                " floats");
  }
  if (!(max_ratio >= 1.0)) {
    throw Error("check_precision: max_ratio must be >= 1, got " + std::to_string(max_ratio));
  }
  double candidate_sq = 0.0, model_sq = 0.0, reference_sq = 0.0;
  int64_t finite = 0;
  bool candidate_nonfinite = false;
  for (int64_t i = 0; i < elements; ++i) {
    const double r = float_at(reference, i);
    if (!std::isfinite(r)) continue;
    const double g = float_at(got, i);
    const double m = float_at(model, i);
    if (!std::isfinite(g)) candidate_nonfinite = true;
    candidate_sq += (g - r) * (g - r);
    // A model that overflows where the reference does not measures nothing there.
    if (std::isfinite(m)) model_sq += (m - r) * (m - r);
    reference_sq += r * r;
    ++finite;
  }
  PrecisionCheck check;
  if (finite == 0) return check;
  const double n = static_cast<double>(finite);
  check.candidate_rms_error =
      candidate_nonfinite ? std::numeric_limits<double>::infinity() : std::sqrt(candidate_sq / n);
  check.model_rms_error = std::sqrt(model_sq / n);
  check.reference_rms = std::sqrt(reference_sq / n);
  constexpr double kUnitRoundoff = 0x1p-24;
  check.allowed_rms_error =
      max_ratio * check.model_rms_error + 4.0 * kUnitRoundoff * check.reference_rms;
  check.ratio = check.model_rms_error > 0.0 ? check.candidate_rms_error / check.model_rms_error
                : check.candidate_rms_error > 0.0 ? std::numeric_limits<double>::infinity()
                                                  : 0.0;
  // Where plain fp32 is itself exact to rounding (K = 1, or terms that cancel into a small
  // result) the ratio says nothing: an honest split-precision product errs a few ulp of its
  // terms, which can be many times the model's error there. The tolerance alone judges.
  check.applied = check.model_rms_error > kUnitRoundoff * check.reference_rms;
  check.passed = !check.applied || check.candidate_rms_error <= check.allowed_rms_error;
  if (!check.passed) {
    check.failure = fmt::format(
        "below fp32 precision: its error against the float64 reference is RMS {:.3g}, {} that of "
        "a plain fp32 computation of the operator on the same inputs (RMS {:.3g}; allowed "
        "{:g}x + 4 ulp = {:.3g}). TF32 or bf16 tensor cores, or inputs rounded to fewer bits, "
        "err like this: the task's precision is fp32, so keep fp32 arithmetic or a "
        "split-precision scheme (3xTF32, bf16x3), or set precision = \"tf32\" in the task to "
        "accept it",
        check.candidate_rms_error,
        format_ratio(check.ratio),
        check.model_rms_error, max_ratio, check.allowed_rms_error);
  }
  return check;
}

int64_t first_beyond_fp32_error(std::span<const std::byte> got,
                                std::span<const std::byte> reference,
                                std::span<const std::byte> model, int64_t elements, double rtol,
                                double atol, double max_ratio, double model_rms_error) {
  const auto needed = static_cast<size_t>(elements) * sizeof(float);
  if (elements < 0 || got.size() < needed || reference.size() < needed || model.size() < needed) {
    throw Error("first_beyond_fp32_error: a span is shorter than " + std::to_string(elements) +
                " floats");
  }
  if (!(rtol >= 0.0) || !(atol >= 0.0) || !(max_ratio >= 0.0) || !(model_rms_error >= 0.0)) {
    throw Error("first_beyond_fp32_error: rtol, atol, max_ratio and model_rms_error must be >= 0");
  }
  for (int64_t i = 0; i < elements; ++i) {
    const double r = float_at(reference, i);
    if (!std::isfinite(r)) continue;
    const double g = float_at(got, i);
    const double m = float_at(model, i);
    if (!std::isfinite(g)) return i;
    const double model_error = std::max(std::isfinite(m) ? std::abs(m - r) : 0.0, model_rms_error);
    if (std::abs(g - r) > atol + rtol * std::abs(r) + max_ratio * model_error) return i;
  }
  return -1;
}

}  // namespace kforge::evaluation

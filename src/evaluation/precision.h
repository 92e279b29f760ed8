// The fp32 precision rule (Task::precision = "fp32"): a candidate's f32 output may be off the
// float64 reference by at most a few times what a plain fp32 computation of the same operator is
// off by, measured on the same inputs.
//
// Why measured, not a formula: the classic bound on an fp32 dot product of length K,
// |error| <= gamma_K * sum |a_k b_k| with gamma_K = K u / (1 - K u), u = 2^-24 (Higham, Accuracy
// and Stability of Numerical Algorithms, 2nd ed., 2002, section 3.1), is K u ~ 2^-11 relative at
// K = 8192: exactly the rounding of TF32's 10-bit mantissa, so such a bound lets TF32 through;
// the probabilistic sqrt(K) u bound (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019) is
// tighter but still a bound on the worst order. The task's fp32 model (its reference built at
// fp32, Task::fp32_model_defines) gives the error an ordinary fp32 order actually makes on each
// gate case, normal and heavy-tailed inputs included; TF32 or bf16 arithmetic makes ~100-10000x
// that, split-precision schemes (3xTF32, bf16x3) about the same or less.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kforge::evaluation {

/// Outcome of the rule on one f32 output.
struct PrecisionCheck {
  bool passed = true;
  /// Empty when passed; otherwise one sentence naming both errors, their ratio and what to do.
  std::string failure;
  double candidate_rms_error = 0.0;  // RMS(got - reference) over finite reference elements
  double model_rms_error = 0.0;      // RMS(model - reference) over the same elements
  double reference_rms = 0.0;        // RMS(reference)
  double allowed_rms_error = 0.0;    // max_ratio * model_rms_error + 4 u RMS(reference)
  /// candidate_rms_error / model_rms_error (inf when only the model's error is 0; 0 when both).
  double ratio = 0.0;
  /// False where the fp32 model is exact to rounding (model RMS error <= 2^-24 RMS(reference)):
  /// the ratio cannot tell fp32 from a split scheme there, so the case passes the rule.
  bool applied = true;
};

/// A PrecisionCheck's ratio for messages: "130x", or "many times" when it is infinite.
std::string format_ratio(double ratio);

/// Checks `got` against `reference` with the fp32 model's outputs `model` on the same inputs,
/// all f32, `elements` each (densely packed; longer spans are fine).
///
/// Over the elements where the reference is finite:
///   RMS(got - reference) <= max_ratio * RMS(model - reference) + 4 * 2^-24 * RMS(reference),
/// applied only where RMS(model - reference) > 2^-24 RMS(reference) (see `applied`).
/// The last term is four units in the last place of a typical element: room for the final
/// rounding, which the model may get right by chance on every element (e.g. K = 1). A non-finite
/// `got` where the reference is finite fails (the tolerance check names the element).
/// Throws Error when a span is shorter than `elements` floats or max_ratio < 1.
PrecisionCheck check_precision(std::span<const std::byte> got,
                               std::span<const std::byte> reference,
                               std::span<const std::byte> model, int64_t elements,
                               double max_ratio);

/// Where an fp32 output fails the task's element-wise tolerance, whether every failing element
/// is still within `max_ratio` times what an fp32 computation errs there:
///   |got_i - ref_i| <= atol + rtol |ref_i| + max_ratio max(|model_i - ref_i|, model_rms_error)
/// for every finite ref_i, with got_i finite there. The per-element twin of check_precision: a
/// dot product over inputs that cancel (the gate's pareto and spike cases) can leave an element
/// whose honest fp32 rounding exceeds a fixed tolerance; such an element is as accurate as fp32
/// allows, not wrong, and the RMS rule still rejects reduced precision. The model's error at one
/// element is one draw of its rounding: another summation order (the candidate's) errs with the
/// same spread but not the same draw, and the model may be lucky exactly where the candidate is
/// not (seen on an H100: a direct-sum transposed convolution 3.6e-5 off where cuDNN's fp32 was
/// within 1.6e-6), so the model's RMS error over the output (check_precision's
/// model_rms_error) is the floor of its error at each element. Returns the index of the first
/// element beyond that, or -1 when none is. Throws Error when a span is shorter than `elements`
/// floats, or rtol, atol, max_ratio or model_rms_error is negative.
int64_t first_beyond_fp32_error(std::span<const std::byte> got,
                                std::span<const std::byte> reference,
                                std::span<const std::byte> model, int64_t elements, double rtol,
                                double atol, double max_ratio, double model_rms_error);

}  // namespace kforge::evaluation

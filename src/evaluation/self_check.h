// The task self-test: before a task judges candidates, prove that its check can tell degenerate
// outputs (all zeros, a constant, a copy of an input) from the right answer. A task whose
// expected outputs are all below atol, or constant, or equal to an input would otherwise let a
// kernel that computes nothing be reported as correct, and fast.
//
// Runs in the orchestrator on the reference's host bytes (see comparison.h for the layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "evaluation/comparison.h"
#include "core/task.h"

namespace kforge::evaluation {

/// One tensor's host bytes. `bytes` is borrowed: it must outlive the call it is passed to.
struct TensorBytes {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

/// The reference's outputs on a remapped copy of an input (InputRemap, host_data.h): what a
/// kernel computes that reads only a strided subsample or half the rows. `outputs` holds one
/// buffer per expected output, same order and sizes; borrowed like TensorBytes::bytes.
struct SelfTestProbe {
  std::string remap;  // InputRemap name: "every_16th" or "half_rows"
  std::vector<std::span<const std::byte>> outputs;
};

/// One workload x seed of a task: its inputs, and per output the reference's bytes and the
/// tolerance that output is judged with.
struct SelfTestInput {
  std::string label;  // e.g. "small, seed 1", for messages
  std::vector<TensorBytes> inputs;
  std::vector<TensorBytes> expected_outputs;
  std::vector<ToleranceSpec> tolerances;  // one per expected output, same order
  std::vector<SelfTestProbe> probes;      // optional; a remap that changes no input is left out
};

/// One candidate output tried on one SelfTestInput.
struct SelfTestCase {
  std::string name;     // "all zeros", "constant", "first input", "reference", or
                        // "reference on every_16th inputs" / "... half_rows inputs" (probes)
  std::string label;    // the SelfTestInput's label
  bool passed = false;  // it passed compare_output on every output of that input
  std::string detail;   // the first failing output's message, or "passes all N outputs"
};

struct SelfTestReport {
  bool reference_passes = false;  // the expected outputs pass against themselves on every input
  /// One sentence per degenerate output that passes on every input, e.g. "an all-zeros output
  /// passes on every case: the tolerance cannot tell zeros from the right answer".
  std::vector<std::string> weaknesses;
  /// Per input, in order: all zeros, constant, first input, reference, then its probes. "first
  /// input" is left out for an input with no input tensors, or an empty first one; "constant"
  /// where every output has at most one element.
  std::vector<SelfTestCase> cases;
};

/// On each input and each of its outputs, tries:
///   all zeros;
///   a constant: the mean of the finite expected values, stored in the output dtype (the
///     constant with the smallest RMS error, so the one most likely to pass); left out where
///     every output has at most one element (a scalar is always its own mean);
///   first input: the first input tensor's values converted to the output dtype (store_element),
///     cycled or truncated to the output's element count;
///   reference: the expected output itself, which must pass;
///   each probe: the reference's outputs on the remapped inputs, which must fail somewhere.
/// A degenerate output or a probe is a weakness only if it passes on every output of every input
/// where it was tried: a right answer that happens to be all zeros on one workload is fine as
/// long as some other workload tells zeros apart, and a mean that a subsample approximates on
/// uniform data is fine as long as the heavy-tailed or spiky cases tell them apart. Needs one
/// scratch buffer the size of the largest output.
/// Throws Error if `inputs` is empty, an input has no outputs or a tolerance or probe output count
/// that differs from its outputs, or a buffer is shorter than its shape needs.
SelfTestReport self_test_outputs(const std::vector<SelfTestInput>& inputs);

/// Writes `value` as element `index` of a `dtype` buffer (little-endian): f32/f64 round to
/// nearest, f16 and bf16 through float (float_to_half, float_to_bfloat16), integers round to
/// nearest and saturate at the type's range, and NaN becomes 0 for integers.
void store_element(DType dtype, std::byte* data, int64_t index, double value);

}  // namespace kforge::evaluation

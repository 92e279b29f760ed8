#include "evaluation/self_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "common/error.h"
#include "worker/host_data.h"

namespace kforge::evaluation {
namespace {

enum class Candidate { all_zeros, constant, first_input, reference };

constexpr Candidate kDegenerate[] = {Candidate::all_zeros, Candidate::constant,
                                     Candidate::first_input};

std::string to_string(Candidate candidate) {
  switch (candidate) {
    case Candidate::all_zeros:
      return "all zeros";
    case Candidate::constant:
      return "constant";
    case Candidate::first_input:
      return "first input";
    case Candidate::reference:
      return "reference";
  }
  return "unknown";
}

/// The weakness sentence for a degenerate output that passes everywhere, with what to change.
std::string weakness(Candidate candidate) {
  switch (candidate) {
    case Candidate::all_zeros:
      return "an all-zeros output passes on every case: the tolerance cannot tell zeros from the "
             "right answer (the expected values are within atol of zero; use workloads with "
             "larger outputs or lower atol)";
    case Candidate::constant:
      return "a constant output (the mean of the expected values) passes on every case: the "
             "expected outputs barely vary, so the check cannot tell a constant from the right "
             "answer";
    case Candidate::first_input:
      return "copying the first input into the output passes on every case: the output is "
             "(nearly) the first input, so the check cannot tell a copy from the right answer";
    case Candidate::reference:
      break;
  }
  return "";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

/// Elements of `tensor`; throws Error unless its bytes hold them all.
int64_t checked_elements(const TensorBytes& tensor, const std::string& label) {
  const std::vector<int64_t>& shape = tensor.shape;
  // Division instead of multiplying out the bytes, so that an absurd shape cannot wrap around.
  const int64_t capacity = static_cast<int64_t>(tensor.bytes.size()) / dtype_size(tensor.dtype);
  bool fits = std::none_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; });
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t elements = 1;
  for (size_t d = 0; fits && !empty && d < shape.size(); ++d) {
    fits = elements <= capacity / shape[d];
    elements *= fits ? shape[d] : 1;
  }
  if (!fits) {
    throw Error("self_test_outputs: tensor '" + tensor.name + "' of case '" + label + "': " +
                std::to_string(tensor.bytes.size()) + " bytes are too few for " +
                to_string(tensor.dtype) + " shape " + shape_text(shape));
  }
  return empty ? 0 : elements;
}

/// Mean of the finite values of `tensor`; 0 if it has none.
double finite_mean(const TensorBytes& tensor, int64_t elements) {
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < elements; ++i) {
    const double value = worker::element_as_double(tensor.dtype, tensor.bytes.data(), i);
    if (!std::isfinite(value)) continue;
    sum += value;
    ++count;
  }
  return count ? sum / static_cast<double>(count) : 0.0;
}

/// Builds `candidate` for output `expected` of `input` in `scratch`; returns the bytes to judge.
std::span<const std::byte> build(Candidate candidate, const SelfTestInput& input,
                                 const TensorBytes& expected, std::vector<std::byte>& scratch) {
  const int64_t elements = checked_elements(expected, input.label);
  const int element_bytes = dtype_size(expected.dtype);
  if (candidate == Candidate::reference) return expected.bytes;
  scratch.assign(static_cast<size_t>(elements) * element_bytes, std::byte{0});
  if (candidate == Candidate::constant && elements > 0) {
    store_element(expected.dtype, scratch.data(), 0, finite_mean(expected, elements));
    for (int64_t i = 1; i < elements; ++i) {
      std::memcpy(scratch.data() + i * element_bytes, scratch.data(), element_bytes);
    }
  } else if (candidate == Candidate::first_input) {
    const TensorBytes& source = input.inputs.front();
    const int64_t source_elements = checked_elements(source, input.label);
    for (int64_t i = 0; i < elements; ++i) {
      store_element(expected.dtype, scratch.data(), i,
                    worker::element_as_double(source.dtype, source.bytes.data(),
                                              i % source_elements));
    }
  }
  return scratch;
}

bool applies(Candidate candidate, const SelfTestInput& input) {
  if (candidate == Candidate::constant) {
    // A one-element output (a scalar loss) is always its own mean: no test at all.
    return std::any_of(input.expected_outputs.begin(), input.expected_outputs.end(),
                       [](const TensorBytes& output) {
                         return worker::element_count(output.shape) > 1;
                       });
  }
  if (candidate != Candidate::first_input) return true;
  return !input.inputs.empty() && worker::element_count(input.inputs.front().shape) > 0;
}

/// Judges `candidate` on every output of `input`; stops at the first output it fails.
SelfTestCase try_candidate(Candidate candidate, const SelfTestInput& input,
                           std::vector<std::byte>& scratch) {
  SelfTestCase result{to_string(candidate), input.label, true, ""};
  for (size_t o = 0; o < input.expected_outputs.size(); ++o) {
    const TensorBytes& expected = input.expected_outputs[o];
    const std::span<const std::byte> got = build(candidate, input, expected, scratch);
    const OutputComparison comparison = compare_output(expected.dtype, got, expected.bytes,
                                                       expected.shape, input.tolerances[o]);
    if (!comparison.passed) {
      result.passed = false;
      result.detail = "output '" + expected.name + "': " + comparison.failure;
      return result;
    }
  }
  result.detail = "passes all " + std::to_string(input.expected_outputs.size()) + " outputs";
  return result;
}

/// The reference's outputs on `probe`'s remapped inputs, judged against the true expected ones.
SelfTestCase try_probe(const SelfTestProbe& probe, const SelfTestInput& input) {
  SelfTestCase result{"reference on " + probe.remap + " inputs", input.label, true, ""};
  for (size_t o = 0; o < input.expected_outputs.size(); ++o) {
    const TensorBytes& expected = input.expected_outputs[o];
    if (probe.outputs[o].size() != expected.bytes.size()) {
      throw Error("self_test_outputs: probe " + probe.remap + " of case '" + input.label +
                  "' has " + std::to_string(probe.outputs[o].size()) + " bytes for output '" +
                  expected.name + "', expected " + std::to_string(expected.bytes.size()));
    }
    const OutputComparison comparison = compare_output(expected.dtype, probe.outputs[o],
                                                       expected.bytes, expected.shape,
                                                       input.tolerances[o]);
    if (!comparison.passed) {
      result.passed = false;
      result.detail = "output '" + expected.name + "': " + comparison.failure;
      return result;
    }
  }
  result.detail = "passes all " + std::to_string(input.expected_outputs.size()) + " outputs";
  return result;
}

/// The weakness sentence for a probe that passes everywhere.
std::string probe_weakness(const std::string& remap) {
  const std::string reads = remap == "every_16th" ? "only every 16th element of its inputs"
                                                  : "only the first half of the rows";
  return "the reference on inputs remapped " + remap + " passes on every case: the tolerance "
         "cannot tell a kernel that reads " + reads + " from the right answer (tighten rtol, or "
         "add workloads or distributions where every element matters)";
}

void check_input(const SelfTestInput& input) {
  if (input.expected_outputs.empty()) {
    throw Error("self_test_outputs: case '" + input.label + "' has no outputs");
  }
  if (input.tolerances.size() != input.expected_outputs.size()) {
    throw Error("self_test_outputs: case '" + input.label + "' has " +
                std::to_string(input.expected_outputs.size()) + " outputs but " +
                std::to_string(input.tolerances.size()) + " tolerances");
  }
  for (const SelfTestProbe& probe : input.probes) {
    if (probe.outputs.size() != input.expected_outputs.size()) {
      throw Error("self_test_outputs: probe " + probe.remap + " of case '" + input.label +
                  "' has " + std::to_string(probe.outputs.size()) + " outputs, expected " +
                  std::to_string(input.expected_outputs.size()));
    }
  }
}

}  // namespace

SelfTestReport self_test_outputs(const std::vector<SelfTestInput>& inputs) {
  if (inputs.empty()) throw Error("self_test_outputs: no cases to test");
  SelfTestReport report;
  report.reference_passes = true;
  struct Tally {
    int tried = 0;
    int passed = 0;
  };
  Tally tally[std::size(kDegenerate)];
  std::map<std::string, Tally> probe_tally;  // by remap name, in name order
  std::vector<std::byte> scratch;
  for (const SelfTestInput& input : inputs) {
    check_input(input);
    for (size_t k = 0; k < std::size(kDegenerate); ++k) {
      if (!applies(kDegenerate[k], input)) continue;
      report.cases.push_back(try_candidate(kDegenerate[k], input, scratch));
      ++tally[k].tried;
      tally[k].passed += report.cases.back().passed;
    }
    report.cases.push_back(try_candidate(Candidate::reference, input, scratch));
    report.reference_passes = report.reference_passes && report.cases.back().passed;
    for (const SelfTestProbe& probe : input.probes) {
      report.cases.push_back(try_probe(probe, input));
      Tally& counts = probe_tally[probe.remap];
      ++counts.tried;
      counts.passed += report.cases.back().passed;
    }
  }
  for (size_t k = 0; k < std::size(kDegenerate); ++k) {
    if (tally[k].tried > 0 && tally[k].passed == tally[k].tried) {
      report.weaknesses.push_back(weakness(kDegenerate[k]));
    }
  }
  for (const auto& [remap, counts] : probe_tally) {
    if (counts.tried > 0 && counts.passed == counts.tried) {
      report.weaknesses.push_back(probe_weakness(remap));
    }
  }
  return report;
}

namespace {

template <typename Int>
Int saturating_round(double value) {
  if (std::isnan(value)) return 0;
  // max() as a double rounds up to 2^31 or 2^63, hence >= rather than >.
  if (value >= static_cast<double>(std::numeric_limits<Int>::max())) {
    return std::numeric_limits<Int>::max();
  }
  if (value <= static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  return static_cast<Int>(std::llround(value));
}

/// double -> float, rounding to nearest. Beyond float's range a plain cast is undefined
/// behaviour; this gives +-inf there.
float narrow(double value) {
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  if (std::isfinite(value) && std::fabs(value) > std::numeric_limits<float>::max()) {
    return value > 0 ? kInfinity : -kInfinity;
  }
  return static_cast<float>(value);
}

template <typename Raw>
void store(std::byte* data, int64_t index, Raw raw) {
  std::memcpy(data + index * static_cast<int64_t>(sizeof(Raw)), &raw, sizeof(Raw));
}

}  // namespace

void store_element(DType dtype, std::byte* data, int64_t index, double value) {
  switch (dtype) {
    case DType::f32:
      return store(data, index, narrow(value));
    case DType::f64:
      return store(data, index, value);
    case DType::f16:
      return store(data, index, worker::float_to_half(narrow(value)));
    case DType::bf16:
      return store(data, index, worker::float_to_bfloat16(narrow(value)));
    case DType::i32:
      return store(data, index, saturating_round<int32_t>(value));
    case DType::i64:
      return store(data, index, saturating_round<int64_t>(value));
    case DType::b8:
      return store(data, index, static_cast<uint8_t>(value != 0.0));
  }
}

}  // namespace kforge::evaluation

// Verdicts: the typed outcome of evaluating one candidate. A failed candidate is a result.
#pragma once

#include <string>

namespace kforge {

/// Outcome of one candidate, in the order the gate reaches them (DESIGN.md, vocabulary).
enum class Verdict {
  ok,
  rejected_by_policy,
  compile_error,
  wrong_signature,
  wrong_answer,
  runtime_error,
  /// Timed faster than physically possible (below bytes / bandwidth or FLOPs / peak), or with
  /// work hidden from the timing events (host wall clock far above device time).
  implausible_timing,
  timeout,
  worker_crashed,
};

std::string to_string(Verdict verdict);
/// Inverse of to_string; throws Error on an unknown name.
Verdict parse_verdict(const std::string& name);

}  // namespace kforge

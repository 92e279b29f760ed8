// What the last evaluation said about the current candidate (a small, explicit diagnosis), and a
// matcher that decides whether a knowledge-file trigger ("achieved bandwidth below 60% of copy
// bandwidth") applies to it. The offline strategy selector prefers strategies whose triggers
// match; triggers the matcher cannot judge are neutral.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "memory/htg.h"

namespace kforge::memory {

/// The last feedback, reduced to what triggers talk about. Fields are empty when unknown.
struct Diagnosis {
  std::string verdict;             // last candidate's verdict; "" before any feedback
  std::optional<double> log_gain;  // ln(parent time / candidate time) when verdict ok
  /// Achieved bytes per second of the best candidate over the device's measured copy bandwidth
  /// (task bytes / median time / copy bytes per second), in (0, ~1].
  std::optional<double> bandwidth_fraction;
  /// Arithmetic intensity (task FLOPs / task bytes) below the device's ridge point
  /// (peak FLOP/s / copy bytes/s), i.e. the roofline says memory-bound.
  std::optional<bool> memory_bound;

  bool compile_failed() const { return verdict == "compile_error"; }
  bool wrong_answer() const { return verdict == "wrong_answer"; }
  /// One line, e.g. "verdict=ok gain=+0.031 bandwidth=0.42 memory_bound=yes"; unknown fields are
  /// left out; "" when nothing is known. Stored with each evidence row.
  std::string summary() const;
};

/// Builds a diagnosis from one evaluation. `median_ms`, `flops`, `copy_bytes_per_s` and
/// `peak_flops_per_s` may be absent or <= 0 (then the derived fields stay unknown).
Diagnosis diagnose(const std::string& verdict, std::optional<double> log_gain,
                   std::optional<double> median_ms, double bytes_moved, std::optional<double> flops,
                   double copy_bytes_per_s, double peak_flops_per_s);

enum class TriggerMatch { matches, contradicts, unknown };

/// Judges one trigger string against `diagnosis`. Rules, tried in order on the lowercased text:
///   1. "below N%" together with "bandwidth" or "copy"  -> bandwidth_fraction < N / 100
///   2. "compile error", "fails/does not compile"       -> verdict compile_error
///   3. "wrong answer", "tolerance", "accuracy"          -> verdict wrong_answer
///   4. "compute-bound", "above the ridge point"         -> memory_bound is false
///   5. "memory-bound", "bandwidth", "bytes in flight"   -> memory_bound is true
/// A rule whose field is unknown, and a trigger no rule recognizes (row shapes, profiler
/// counters kforge does not collect yet), give `unknown`.
TriggerMatch match_trigger(std::string_view trigger, const Diagnosis& diagnosis);

/// True when at least one of the strategy's triggers matches the diagnosis.
bool triggered(const Strategy& strategy, const Diagnosis& diagnosis);

}  // namespace kforge::memory

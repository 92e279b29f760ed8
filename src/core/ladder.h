// The evaluation ladder's vocabulary (DESIGN.md "Evaluation plane", 6-7): its rungs, and the
// outcomes of the decisions taken between them (the paired comparison with the best, the
// acceptance of a new best, the promotion to rung 2).
//
// Each enum has one string form (to_string) and its inverse (parse_*, which throws Error naming
// the bad value and the known ones). The strings are what the run database, events.jsonl,
// result.json, report.md and the --explain lines have always written; a run directory written
// before these types existed reads back through the same parse_* functions.
#pragma once

#include <string>

namespace kforge {

/// One fidelity level of the evaluation ladder; the value is the rung's number (result.json's
/// "rung", the progress line's occupancy). "gate" .. "final".
enum class Rung {
  gate = 0,   // rung 0: the gate on small workloads (and the build before it)
  quick = 1,  // rung 1: quick timing on the primary timed workload
  full = 2,   // rung 2: every timed workload, the full measurement policy
  final = 3,  // rung 3: the best and the reference timed interleaved, the profile
};
/// The number of rungs (the size of a per-rung occupancy table).
inline constexpr int kRungCount = 4;
/// The rung's number, 0 (gate) to 3 (final).
constexpr int rung_number(Rung rung) { return static_cast<int>(rung); }
std::string to_string(Rung rung);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
Rung parse_rung(const std::string& name);

/// The paired, interleaved comparison of a challenger with the best (the "acceptance" decision
/// of the run database): "faster", "slower", "tie" (the confidence interval does not clear
/// min_gain either way), or "failed" (either candidate failed a timing: no comparison).
enum class ComparisonOutcome { faster, slower, tie, failed };
std::string to_string(ComparisonOutcome outcome);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
ComparisonOutcome parse_comparison_outcome(const std::string& name);

/// What became of a candidate once judged against the best (the "outcome" decision):
/// "accepted" (the new best), "not_better" (correct, not faster beyond noise) or "rejected"
/// (failed the gate, the quick rung or a checked call of the comparison).
enum class AcceptanceOutcome { accepted, not_better, rejected };
std::string to_string(AcceptanceOutcome outcome);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
AcceptanceOutcome parse_acceptance_outcome(const std::string& name);

/// The scheduler's decision on a correct candidate after rung 1 (the "promotion" decision):
/// "promoted" to rung 2 or "pruned" by successive halving.
enum class PromotionOutcome { promoted, pruned };
std::string to_string(PromotionOutcome outcome);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
PromotionOutcome parse_promotion_outcome(const std::string& name);

}  // namespace kforge

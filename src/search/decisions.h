// The decisions the optimizer records in the run database and a resumed run replays
// (run_journal.h), as types: each is written through its to_json and read back through its
// from_json (nlohmann's conversions: `nlohmann::json j = decision`, `j.get<PlanDecision>()`), so
// that a decision's row is declared once. The JSON is what runs have always
// recorded (keys, value strings), so an older run directory reads back the same.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ladder.h"
#include "core/verdict.h"
#include "memory/support.h"
#include "search/scheduler.h"

namespace kforge::search {

/// One move of a step's plan: which parent it refines with which (direction, strategy), the
/// candidate id the generator gave, and why the policy chose it.
struct PlannedMove {
  std::string parent_id;
  std::string direction_id;
  std::string strategy_id;
  std::string candidate_id;
  std::string explanation;
  /// The memory behind the choice, as the policy saw it then (memory/support.h); nullopt in
  /// plans recorded before it was kept.
  std::optional<memory::ChoiceSupport> support;
};

/// Kind "plan", key "step:<step>": the moves the policy chose for a step, and the rng state
/// after planning (the memory store changes as the run goes, so a replay must not plan again).
struct PlanDecision {
  int step = 0;
  std::vector<PlannedMove> moves;
  std::string rng;  // the std::mt19937_64 state, as operator<< writes it
};
void to_json(nlohmann::json& j, const PlanDecision& plan);
/// Throws nlohmann::json::exception on a missing or mistyped field.
void from_json(const nlohmann::json& j, PlanDecision& out);

/// Kind "acceptance", key <challenger>: the paired comparison of a challenger that looked faster
/// on the quick rung with the best of the moment.
struct AcceptanceDecision {
  std::string incumbent;
  std::string challenger;
  ComparisonOutcome outcome = ComparisonOutcome::tie;
  double speedup = 0.0;  // of the challenger over the incumbent (0 when failed)
  double ci_low = 0.0;
  double ci_high = 0.0;
  /// With outcome failed: the candidate whose timing failed, its verdict and why.
  std::string failed;
  Verdict verdict = Verdict::ok;
  std::string message;
};
void to_json(nlohmann::json& j, const AcceptanceDecision& decision);
/// Throws nlohmann::json::exception on a missing or mistyped field, Error on an unknown outcome
/// or verdict.
void from_json(const nlohmann::json& j, AcceptanceDecision& out);

/// Kind "promotion", key <candidate>: the scheduler's successive-halving decision on a correct
/// candidate of a step's cohort (scheduler.h).
struct PromotionDecision {
  std::string candidate;
  PromotionOutcome outcome = PromotionOutcome::pruned;
  double score = 0.0;  // S(p, 1)
  int rank = 0;        // 1-based, by score within the cohort
  int quota = 0;       // ceil(n / eta)
  size_t cohort = 0;   // n
  double eta = 0.0;
  Fidelity fidelity = Fidelity::ladder;
  std::string reason;
};
void to_json(nlohmann::json& j, const PromotionDecision& decision);
/// Throws nlohmann::json::exception on a missing or mistyped field, Error on an unknown outcome
/// or fidelity.
void from_json(const nlohmann::json& j, PromotionDecision& out);

/// Kind "full_rung", key <candidate>: rung 2's result for one candidate (every timed workload).
struct FullRungDecision {
  std::string candidate;
  Verdict verdict = Verdict::ok;
  std::string message;
  double geomean_speedup = 0.0;
  /// (workload, speedup over the reference) in task order; empty for runs recorded before
  /// workload speedups were (only the geomean).
  std::vector<std::pair<std::string, double>> workload_speedups;
};
void to_json(nlohmann::json& j, const FullRungDecision& decision);
/// Throws nlohmann::json::exception on a missing or mistyped field, Error on an unknown verdict.
void from_json(const nlohmann::json& j, FullRungDecision& out);

/// The reference's numbers recorded at the run's start (meta "reference"): the decisions of
/// every later session were made with these (prompts, the policy's state, diagnoses).
struct ReferenceTiming {
  double quick_median_ms = 0.0;
  double copy_bytes_per_s = 0.0;
  double peak_flops_per_s = 0.0;
};
void to_json(nlohmann::json& j, const ReferenceTiming& reference);
/// Throws nlohmann::json::exception on a missing or mistyped field.
void from_json(const nlohmann::json& j, ReferenceTiming& out);

}  // namespace kforge::search

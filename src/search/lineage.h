// The lineage of a run's best candidate (issue 21): the chain of candidates from the expert
// hint (or first kernel) it descends from to the best, each with the direction and strategy
// that made it, its speedup, and whether the policy chose that move from earlier runs' memory
// evidence or explored (memory/support.h, recorded when the move was planned). result.json
// carries it as best.lineage; `kforge optimize` prints it, report.md and report.html show it
// (report/summary.h, lineage_lines: the report layer renders result.json).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/support.h"

namespace kforge::search {

/// One candidate of a lineage.
struct LineageStep {
  int index = 0;             // the candidate's index in the run
  int step = 0;              // search step (0: expert hints)
  std::string id;
  std::string parent_id;     // empty for a hint
  std::string direction_id;  // empty for a hint
  std::string strategy_id;
  /// Speedup over the reference: rung 2's geomean over every timed workload when it ran
  /// ("full"), else the quick rung's reference median over its median ("quick"); 0 and
  /// "none" when it has neither (a repaired ancestor's failed try).
  double speedup = 0.0;
  std::string speedup_rung = "none";
  /// Why its move was chosen; nullopt for a hint or a run that did not record it.
  std::optional<memory::ChoiceSupport> support;
};
void to_json(nlohmann::json& j, const LineageStep& step);

/// The chain from the root ancestor of `best_id` to it, root first, following parent_id through
/// `candidates` (the run's records in any order). A parent that is not among them ends the
/// chain there (e.g. an LLM repair's failed parent); a cycle (never made by the optimizer)
/// too. Empty when `best_id` is not among them.
std::vector<LineageStep> trace_lineage(std::span<const LineageStep> candidates,
                                       const std::string& best_id);

}  // namespace kforge::search

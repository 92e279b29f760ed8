#include "memory/support.h"

#include <algorithm>
#include <set>

namespace kforge::memory {
namespace {

// Whether `row` is a transition into `direction` from the direction chosen j steps before the
// decision (prefix: oldest first), for some lag j <= lags.
bool attended_transition(const Evidence& row, const std::string& direction,
                         const std::vector<std::string>& prefix, int lags) {
  if (row.direction_id != direction) return false;
  const size_t k = std::min({static_cast<size_t>(std::max(lags, 0)), prefix.size(),
                             row.prefix.size()});
  for (size_t j = 1; j <= k; ++j) {
    if (row.prefix[j - 1] == prefix[prefix.size() - j]) return true;
  }
  return false;
}

bool positive(const Evidence& row) {
  return row.verdict == "ok" && row.log_gain && *row.log_gain > 0.0;
}

}  // namespace

EvidenceReads evidence_reads(PolicyKind kind, const Ablations& ablations, int prefix_length) {
  EvidenceReads reads;
  switch (kind) {
    case PolicyKind::htam:
      reads.transition_lags = ablations.prefix ? std::min(prefix_length, 1) : prefix_length;
      reads.direction = !ablations.hierarchy;
      // The hierarchy ablation scores each strategy by its own node term.
      reads.strategy = ablations.hierarchy || !ablations.local_memory;
      return reads;
    case PolicyKind::flat:
      reads.strategy = true;
      return reads;
    case PolicyKind::feedback:
    case PolicyKind::oneshot:
    case PolicyKind::random:
      return reads;
  }
  return reads;
}

void to_json(nlohmann::json& j, const ChoiceSupport& s) {
  j = {{"basis", s.basis},
       {"prior_transitions", s.prior_transitions},
       {"prior_direction", s.prior_direction},
       {"prior_strategy", s.prior_strategy},
       {"prior_against", s.prior_against},
       {"prior_tasks", s.prior_tasks},
       {"run_support", s.run_support},
       {"probability", s.probability}};
}

void from_json(const nlohmann::json& j, ChoiceSupport& out) {
  out.basis = j.value("basis", "explored");
  out.prior_transitions = j.value("prior_transitions", 0);
  out.prior_direction = j.value("prior_direction", 0);
  out.prior_strategy = j.value("prior_strategy", 0);
  out.prior_against = j.value("prior_against", 0);
  out.prior_tasks = j.value("prior_tasks", 0);
  out.run_support = j.value("run_support", 0);
  out.probability = j.value("probability", 0.0);
}

ChoiceSupport choice_support(const MemoryView& view, std::size_t prior_rows,
                             const StateSummary& state, const PolicyChoice& choice,
                             const EvidenceReads& reads) {
  ChoiceSupport support;
  for (const DirectionScore& s : choice.scores) {
    if (s.direction_id == choice.direction.id &&
        (s.strategy_id.empty() || s.strategy_id == choice.strategy.id)) {
      support.probability = s.probability;
    }
  }
  if (reads.transition_lags == 0 && !reads.direction && !reads.strategy) {
    support.basis = "no_memory";
    return support;
  }
  std::set<std::string> tasks;
  const auto& rows = view.weighted_evidence();
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& [row, weight] = rows[k];
    if (!(weight > 0.0)) continue;
    const bool transition =
        attended_transition(row, choice.direction.id, state.prefix, reads.transition_lags);
    const bool direction = reads.direction && row.direction_id == choice.direction.id;
    const bool strategy = reads.strategy && !row.strategy_id.empty() &&
                          row.strategy_id == choice.strategy.id;
    if (!transition && !direction && !strategy) continue;
    const bool prior = k < prior_rows;
    if (!positive(row)) {
      support.prior_against += prior ? 1 : 0;
      continue;
    }
    if (!prior) {
      ++support.run_support;
      continue;
    }
    support.prior_transitions += transition ? 1 : 0;
    support.prior_direction += direction ? 1 : 0;
    support.prior_strategy += strategy ? 1 : 0;
    tasks.insert(row.provenance.task_hash);
  }
  support.prior_tasks = static_cast<int>(tasks.size());
  if (!tasks.empty()) {
    support.basis = "memory";
  } else if (support.run_support > 0) {
    support.basis = "this_run";
  }
  return support;
}

}  // namespace kforge::memory

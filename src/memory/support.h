// Why a policy's choice was made, in terms of memory evidence: which rows of the HTG the choice
// read, how many of them came from earlier runs and spoke for it (issue 21: "the best
// candidate's lineage: which directions and strategies led to it, from which prior evidence").
//
// Computed at decision time (Optimizer::plan_step), from the same MemoryView the policy reads,
// and recorded in the step's plan, so that a resumed run and the lineage of the best report
// the reason the choice had then, not one reconstructed from a store that has grown since.
//
// What a policy reads (policy.h, baselines.h):
//   htam     the transition edges from the attended prefix into the direction (lag j from the
//            j-th most recent direction, j <= prefix window: 1 with the prefix ablation), the
//            direction's node statistics, the strategy's evidence (the selector's arms); with
//            the hierarchy ablated the strategy's node term replaces the direction's, with local
//            memory ablated the strategy's evidence is not read
//   flat     the strategy's evidence only
//   feedback, random, oneshot: no evidence
// A row "supports" a choice when it was read for it, has a weight > 0 in the decision's
// context (weighting.h) and a positive log gain (htg.h's positive evidence). A row is "prior"
// when it was in the store before the run started: the first `prior_rows` rows of the
// backend's evidence, oldest first (the store appends).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "memory/baselines.h"
#include "memory/policy.h"
#include "memory/weighting.h"

namespace kforge::memory {

/// Which evidence a policy's choice reads (header comment).
struct EvidenceReads {
  int transition_lags = 0;    // edges at lags 1..transition_lags; 0: no transition term
  bool direction = false;     // the direction's node statistics
  bool strategy = false;      // the strategy's evidence
};

/// What `kind` with `ablations` and a prefix window of `prefix_length` reads.
EvidenceReads evidence_reads(PolicyKind kind, const Ablations& ablations, int prefix_length);

/// The memory behind one (direction, strategy) choice.
struct ChoiceSupport {
  /// "memory": a prior row supports it; "this_run": only this run's rows do; "explored": no
  /// row supports it (priors, the exploration bonus and chance chose it); "no_memory": the
  /// policy reads no evidence.
  std::string basis = "explored";
  int prior_transitions = 0;  // prior supporting rows on the attended edges into the direction
  int prior_direction = 0;    // prior supporting rows of the direction
  int prior_strategy = 0;     // prior supporting rows of the strategy
  int prior_against = 0;      // prior rows read that do not support it (slower or failed)
  int prior_tasks = 0;        // distinct task hashes among the prior supporting rows
  int run_support = 0;        // this run's supporting rows read (any of the three kinds)
  /// The policy's probability of the chosen direction (the strategy's under flat or the
  /// hierarchy ablation; 0 when the policy reports no scores).
  double probability = 0.0;
};
void to_json(nlohmann::json& j, const ChoiceSupport& support);
/// Missing fields read as their defaults (throws nlohmann::json::exception on a mistyped one).
void from_json(const nlohmann::json& j, ChoiceSupport& out);

/// The support of `choice` made in `state` (its prefix: the directions chosen before, most
/// recent last) by a policy that reads `reads`, over `view`'s evidence of which the first
/// `prior_rows` predate the run.
ChoiceSupport choice_support(const MemoryView& view, std::size_t prior_rows,
                             const StateSummary& state, const PolicyChoice& choice,
                             const EvidenceReads& reads);

}  // namespace kforge::memory

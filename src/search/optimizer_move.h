// Optimizer::Move, shared by the optimizer's implementation files (not a public header).
#pragma once

#include <optional>
#include <string>

#include "generation/generator.h"
#include "search/optimizer.h"

namespace kforge::search {

/// One planned candidate of a step: which parent it refines with which (direction, strategy),
/// why the policy chose it, and the generator's proposal.
struct Optimizer::Move {
  std::string parent_id;
  /// The parent's quick speedup over its window's reference (Optimizer::quick_speedup): the
  /// move's log gain is measured against it.
  double parent_speedup = 0.0;
  std::string direction_id;
  std::string strategy_id;
  std::string explanation;
  generation::Proposal proposal;
  /// The memory behind the choice (memory/support.h), recorded with the plan.
  std::optional<memory::ChoiceSupport> support;
};

}  // namespace kforge::search

// The generator seam: what writes candidate source. `TemplatesGenerator` (offline, built-in
// expert kernels) is the default; the LLM generator plugs in behind the same interface.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "generation/kernel_family.h"
#include "memory/htg.h"

namespace kforge::generation {

/// One candidate to build and evaluate.
struct Proposal {
  std::string id;            // unique within a run, e.g. "warp_per_row[ROWS_PER_BLOCK=4,VEC=4]"
  std::string parent_id;     // empty for initial proposals
  std::string change;        // what changed versus the parent, in words
  compile::CompileJob job;   // what to compile
  TemplatePoint point;       // the template point (templates generator only)
};

class Generator {
 public:
  virtual ~Generator() = default;
  virtual std::string name() const = 0;
  /// Expert hints that cover the main choices coarsely (KernelBrain's first step): e.g. one
  /// proposal per parallel decomposition at its default parameters.
  virtual std::vector<Proposal> initial_proposals() = 0;
  /// The candidate obtained by applying `strategy` to `parent`, or nullopt when the strategy
  /// cannot be expressed on it (no such parameter, already at the limit, no such variant).
  virtual std::optional<Proposal> apply(const Proposal& parent,
                                        const memory::Strategy& strategy) = 0;
  /// The source a user can take away: the job's source with its defines written in.
  virtual std::string standalone_source(const Proposal& proposal) const = 0;
};

}  // namespace kforge::generation

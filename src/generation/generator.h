// The generator seam: what writes candidate source. `TemplatesGenerator` (offline, built-in
// expert kernels) is the default; `LlmGenerator` (llm_generator.h) asks a model behind the same
// interface. A generator that asks a model plans cheaply in apply() and writes the sources of
// the chosen proposals in write_sources(); it learns outcomes through observe() and may answer
// a failure with repair(). The offline generator ignores those three (their defaults).
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
  std::string failure;       // set by write_sources when no source could be written, and why
};

/// What the evaluation made of one proposal, as the optimizer reports it to its generator.
struct Feedback {
  Verdict verdict = Verdict::ok;
  std::string message;              // the evaluator's reason (wrong answer: max error and where)
  std::string build_log;            // compiler output (errors on compile_error)
  std::optional<double> median_ms;  // quick-rung median when verdict is ok
  double reference_ms = 0.0;        // the reference's quick-rung median
  bool is_best = false;             // this proposal is now the best
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

  /// Writes the source of each proposal that apply() planned without one (all at once, so a
  /// generator may ask a model several questions concurrently). A proposal that cannot be
  /// written gets a non-empty `failure` and is not compiled. Default: sources are complete.
  virtual void write_sources(const std::vector<Proposal*>& proposals) { (void)proposals; }
  /// Receives the outcome of every evaluated proposal (for prompts: last feedback, best so far).
  virtual void observe(const Proposal& proposal, const Feedback& feedback) {
    (void)proposal;
    (void)feedback;
  }
  /// Another attempt at `failed` given why it failed (a bounded repair loop in the optimizer
  /// calls this), its source written; nullopt when this generator does not repair or cannot.
  virtual std::optional<Proposal> repair(const Proposal& failed, const Feedback& feedback) {
    (void)failed;
    (void)feedback;
    return std::nullopt;
  }
  /// Non-empty when the generator can write nothing more (budget spent, interrupted): why.
  virtual std::string exhausted() const { return ""; }
};

}  // namespace kforge::generation

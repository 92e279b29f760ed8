// The baselines HTAM is compared with (HTAM's tables; `kforge optimize --policy`), behind the
// same SearchPolicy interface as HTAM itself, and the factory that builds any of them.
//
//   htam     : Policy (policy.h), with the ablations the user asked for
//   flat     : flat memory retrieval. Every applicable strategy is one item; its score is the
//              provenance-weighted mean log gain of the evidence recorded for it (0 without any)
//              plus b / sqrt(1 + n_w); a softmax with temperature T samples one. No directions,
//              priors, transitions or prefix: past evidence is retrieved as a flat list.
//   feedback : refine from the last result only, no memory read. After an improvement
//              (last gain > 0) stay in the last direction; after anything else (slower, failed,
//              or no step yet) move to another direction; uniformly among those directions'
//              applicable strategies, preferring ones whose triggers match the last diagnosis.
//              Falls back to all applicable strategies when the preferred set is empty.
//   oneshot  : a single generation without memory: one strategy drawn uniformly from the
//              applicable ones (the optimizer also limits the run to one step of one candidate).
//   random   : uniform over all applicable strategies at every step, no memory read.
// Every policy's evaluations are still recorded as evidence (they are facts about the kernels);
// point --memory at a scratch file to keep an experiment's memory apart.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "memory/policy.h"

namespace kforge::memory {

enum class PolicyKind { htam, flat, feedback, oneshot, random };

/// "htam" -> PolicyKind::htam, ...; throws Error listing the valid names otherwise.
PolicyKind parse_policy_kind(const std::string& name);
std::string to_string(PolicyKind kind);

/// Parses ablation names ("hierarchy", "local-memory", "prefix"); each entry may itself be a
/// comma-separated list. Throws Error naming the unknown entry.
Ablations parse_ablations(const std::vector<std::string>& names);
/// "hierarchy,prefix" or "" for none.
std::string to_string(const Ablations& ablations);

/// Builds the policy of `kind` over `store` (kept by reference). Ablations apply only to htam;
/// asking for them with another kind throws Error. `config` as for Policy. `selector` (kept by
/// reference, may be null) replaces htam's offline strategy selector, e.g. the LLM selector;
/// the local-memory ablation and the other policies ignore it.
std::unique_ptr<SearchPolicy> make_search_policy(PolicyKind kind, Store& store,
                                                 const PolicyConfig& config,
                                                 StrategySelector* selector = nullptr);

/// flat (above).
class FlatPolicy final : public SearchPolicy {
 public:
  FlatPolicy(Store& store, PolicyConfig config);
  std::string name() const override { return "flat"; }
  std::optional<PolicyChoice> choose(const StateSummary& state, const StrategyFilter& applicable,
                                     std::mt19937_64& rng) override;

 private:
  Store& store_;
  PolicyConfig config_;
};

/// feedback (above). Reads only the store's graph (directions and strategies), never evidence.
class FeedbackPolicy final : public SearchPolicy {
 public:
  explicit FeedbackPolicy(Store& store);
  std::string name() const override { return "feedback"; }
  std::optional<PolicyChoice> choose(const StateSummary& state, const StrategyFilter& applicable,
                                     std::mt19937_64& rng) override;

 private:
  Store& store_;
};

/// random and oneshot (above): uniform over all applicable strategies; reads no evidence.
class UniformPolicy final : public SearchPolicy {
 public:
  UniformPolicy(Store& store, std::string name);
  std::string name() const override { return name_; }
  std::optional<PolicyChoice> choose(const StateSummary& state, const StrategyFilter& applicable,
                                     std::mt19937_64& rng) override;

 private:
  Store& store_;
  std::string name_;
};

}  // namespace kforge::memory

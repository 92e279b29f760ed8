// HTAM's policy: choose the next direction by transition-attended scoring over the HTG, then a
// strategy under it with a pluggable selector.
//
// Source: HTAM, "Hierarchical Transition-Attended Memory" (../shared/DESIGN.md, HTAM summary):
// the direction score combines the node's own statistics with the utilities of the transition
// edges from the recent prefix of directions, weighted by attention over positions; a softmax
// with a temperature turns scores into a sampling policy. For a candidate direction g after the
// prefix g_{t-k} .. g_{t-1} (most recent last):
//
//   score(g) = prior(g)                                          static prior of the global node
//            + ema_w(g) + b / sqrt(1 + n_w(g))                   node term: trend + exploration
//            + sum_{j=1..k} a_j * U_j(g_{t-j} -> g)              transition term
//
//   k      = min(prefix_length, |prefix|), j = 1 the most recent direction, j <= kMaxLag
//   a_j    = exp(-recency * (j - 1)) / sum_{i=1..k} exp(-recency * (i - 1))   softmax over
//            positions with a recency bias (the last step weighs most; recency = 0: uniform)
//   U_j(e) = mean_w of the edge's lag-j evidence if it has any weight, else prior(e) (the
//            knowledge file's edge prior; 0 when the graph has no edge): unseen edges fall back
//            to priors, and evidence at lag j speaks only for lag j
//   n_w, ema_w, mean_w: provenance-weighted statistics (weighting.h) in the decision's context
//   b      = exploration_bonus
//
//   P(g) = exp(score(g) / T) / sum_h exp(score(h) / T)      softmax policy, T = temperature
//
// HTAM attends with learned weights; kforge uses this fixed exponential-recency softmax, which
// needs no training data and reduces to the paper's "last step only" ablation for recency -> inf.
// Only directions with at least one applicable strategy for the backend are eligible. Sampling
// uses only the caller's std::mt19937_64 (its raw 64-bit outputs, no std:: distributions), so a
// fixed seed gives the same choice on every platform.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "memory/diagnosis.h"
#include "memory/htg.h"
#include "memory/store.h"
#include "memory/weighting.h"

namespace kforge::memory {

/// HTAM's state summary s_t: what a policy knows when it chooses the next step.
struct StateSummary {
  /// Task context: backend, device, toolchain, operator family and task hash of this run; the
  /// provenance every evidence row is weighed against.
  Provenance context;
  std::string task_name;
  /// Last feedback: verdict and gain over its parent of the most recently evaluated candidate,
  /// with the achieved bandwidth fraction and roofline position of the best so far (the
  /// candidate the next step refines); the optimizer fills it after every step.
  Diagnosis last_feedback;
  std::string last_direction_id;  // direction of that candidate; "" before any step
  /// Directions chosen so far in this run, oldest first (most recent last).
  std::vector<std::string> prefix;
  /// Best so far: its id, median time in ms and speedup over the reference (0 when unknown).
  std::string best_id;
  double best_ms = 0.0;
  double best_speedup = 0.0;
  int step = 0;  // 1-based search step
};

/// Parts of HTAM switched off for an ablation study (`--ablate`):
///   hierarchy    : no direction level; a softmax over all applicable strategies, each scored by
///                  its own node term (ema_w + b / sqrt(1 + n_w) of the strategy) plus the
///                  transition term of its direction; no direction priors or statistics
///   local_memory : the strategy under a chosen direction is drawn uniformly among the
///                  trigger-matched applicable ones; strategy evidence is not read
///   prefix       : the transition term attends to the last direction only (k = 1, lag 1):
///                  a first-order (Markov) transition model instead of prefix attention
struct Ablations {
  bool hierarchy = false;
  bool local_memory = false;
  bool prefix = false;
};

struct PolicyConfig {
  double temperature = 0.5;  // softmax temperature T over scores; > 0, larger explores more
  int prefix_length = 3;     // how many recent directions attend (k at most); 0..kMaxLag
  double recency = 1.0;      // slope of the position logits; >= 0, 0 weighs all equally
  // b: bonus for rarely tried nodes, b / sqrt(1 + attempts). 0.1 ~ ln(1.1): an untried
  // direction gets the benefit of a doubt worth about a 10% speedup, fading as it is tried.
  double exploration_bonus = 0.1;
  ProvenanceWeights weights;
  Ablations ablations;
};

/// True when a strategy can be applied to the current candidate (e.g. its edits name parameters
/// the kernel family has). Called once per strategy per choice.
using StrategyFilter = std::function<bool(const Strategy&)>;

/// The score of one eligible direction (or strategy, without hierarchy), split into the terms
/// of the formula above.
struct DirectionScore {
  std::string direction_id;
  std::string strategy_id;  // set only when the hierarchy is ablated
  double prior = 0.0;
  double node_term = 0.0;
  double transition_term = 0.0;
  double score = 0.0;        // prior + node_term + transition_term
  double probability = 0.0;  // softmax(score / temperature) over the eligible ones
};

/// A strategy a selector may pick, with its weighted evidence and whether one of its triggers
/// matches the current diagnosis.
struct StrategyArm {
  Strategy strategy;
  WeightedStats evidence;
  bool triggered = false;
};

/// What a selector picked: an index into its arms and a one-line reason.
struct StrategyPick {
  std::size_t index = 0;
  std::string explanation;
};

/// Chooses a strategy among the applicable arms of one direction (the offline bandit here; an
/// LLM selector plugs in the same way).
class StrategySelector {
 public:
  virtual ~StrategySelector() = default;
  /// `arms` is non-empty. Returns an index < arms.size(). Uses only `rng` for chance.
  virtual StrategyPick select(std::span<const StrategyArm> arms, const StateSummary& state,
                              std::mt19937_64& rng) = 0;
};

/// The offline selector: a UCB1 bandit (Auer, Cesa-Bianchi and Fischer 2002, "Finite-time
/// analysis of the multiarmed bandit problem", policy UCB1) over local evidence, restricted to
/// the arms whose triggers match the diagnosis when at least one does (else all arms). Among
/// those: arms without evidence first (uniformly at random), then
///   argmax mean_w(i) + c * sqrt(ln(1 + N) / n_w(i)),  N = sum of n_w over the considered arms
/// (ln(1 + N) rather than UCB1's ln N keeps the bonus defined for discounted, fractional
/// counts); ties broken uniformly at random.
class Ucb1Selector final : public StrategySelector {
 public:
  /// c = sqrt(2) is Auer et al.'s constant for rewards in a unit range; per-step log gains mostly
  /// lie within [-0.5, 0.5], a range of about 1.
  explicit Ucb1Selector(double exploration = 1.4142135623730951);
  StrategyPick select(std::span<const StrategyArm> arms, const StateSummary& state,
                      std::mt19937_64& rng) override;

 private:
  double exploration_;
};

/// Uniform among the trigger-matched arms (all arms when none matches); reads no evidence.
/// The `local-memory` ablation.
class UniformSelector final : public StrategySelector {
 public:
  StrategyPick select(std::span<const StrategyArm> arms, const StateSummary& state,
                      std::mt19937_64& rng) override;
};

/// A direction, a strategy under it, and why.
struct PolicyChoice {
  Direction direction;
  Strategy strategy;
  std::vector<DirectionScore> scores;  // every eligible direction (or strategy), in store order
  std::string explanation;             // one line per decision, for --explain
};

/// Anything that picks the next (direction, strategy): HTAM (Policy) or a baseline
/// (baselines.h).
class SearchPolicy {
 public:
  virtual ~SearchPolicy() = default;
  /// The policy's name as `--policy` spells it.
  virtual std::string name() const = 0;
  /// The next move for `state`; nullopt when no applicable strategy is left.
  virtual std::optional<PolicyChoice> choose(const StateSummary& state,
                                             const StrategyFilter& applicable,
                                             std::mt19937_64& rng) = 0;
};

/// HTAM (formula above).
class Policy final : public SearchPolicy {
 public:
  /// Throws Error when `config` is out of range (temperature <= 0 or not finite, prefix_length
  /// outside 0..kMaxLag, negative recency or exploration_bonus, weights outside [0, 1]). Keeps
  /// references to `store` and `selector`.
  Policy(Store& store, StrategySelector& selector, PolicyConfig config = {});

  std::string name() const override { return "htam"; }

  /// Scores every eligible direction (or strategy when the hierarchy is ablated) for `state`;
  /// empty when none is eligible. Reads the store; errors are the store's.
  std::vector<DirectionScore> score_directions(const StateSummary& state,
                                               const StrategyFilter& applicable);

  /// Samples from the softmax policy, then asks the selector for a strategy under the chosen
  /// direction. nullopt when no direction is eligible.
  std::optional<PolicyChoice> choose(const StateSummary& state, const StrategyFilter& applicable,
                                     std::mt19937_64& rng) override;

 private:
  struct Candidate {
    Direction direction;
    std::vector<StrategyArm> arms;  // applicable strategies only
  };
  std::vector<Candidate> eligible(const MemoryView& view, const StateSummary& state,
                                  const StrategyFilter& applicable) const;
  double transition_term(const MemoryView& view, const std::string& direction_id,
                         std::span<const std::string> prefix) const;
  double node_term(const WeightedStats& stats) const;
  std::vector<DirectionScore> score_all(const MemoryView& view,
                                        const std::vector<Candidate>& candidates,
                                        const StateSummary& state) const;
  std::optional<PolicyChoice> choose_flat(const MemoryView& view,
                                          std::vector<Candidate>& candidates,
                                          const StateSummary& state, std::mt19937_64& rng) const;

  Store& store_;
  StrategySelector& selector_;
  PolicyConfig config_;
};

/// The position weights a_1..a_count of the formula above (a_1 for the most recent step); they
/// sum to 1. Empty for count <= 0.
std::vector<double> position_weights(int count, double recency);

/// softmax(scores / temperature), computed stably; temperature > 0.
std::vector<double> softmax(std::span<const double> scores, double temperature);

/// Draws an index with the given probabilities (non-negative, summing to ~1) from one rng output.
std::size_t sample_index(std::span<const double> probabilities, std::mt19937_64& rng);

/// A uniform index in [0, count) from one rng output; count > 0.
std::size_t uniform_index(std::size_t count, std::mt19937_64& rng);

/// Indices of the triggered arms, or of all arms when none is triggered.
std::vector<std::size_t> triggered_or_all(std::span<const StrategyArm> arms);

}  // namespace kforge::memory

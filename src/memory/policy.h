// A first HTAM policy: choose the next direction by transition-attended scoring over the HTG,
// then a strategy under it with a pluggable selector (UCB1 offline).
//
// Direction score, for a candidate direction g after the prefix g_{t-k} .. g_{t-1} of recently
// chosen directions (most recent last), following HTAM's transition-attended direction scoring
// (Hierarchical Transition-Attended Memory; DESIGN.md, "Persistent memory" and HTAM summary):
//
//   score(g) = prior(g)                                          static prior of the global node
//            + ema(g) + b / sqrt(1 + n(g))                       node term: trend + exploration
//            + sum_{j=1..k} w_j * U(g_{t-j} -> g)                transition term
//
//   k    = min(prefix_length, |prefix|), j = 1 is the most recent direction
//   w_j  = exp(-recency * (j - 1)) / sum_{i=1..k} exp(-recency * (i - 1))   (softmax over
//          positions: attention-like weights where recent steps weigh more; recency = 0 is uniform)
//   U(e) = mean_log_gain(e) if the edge was attempted, else prior(e); 0 when the graph has no edge
//   n(g) = attempts of g, ema(g) = its ema_log_gain, b = exploration_bonus
//
//   P(g) = exp(score(g) / T) / sum_h exp(score(h) / T)      softmax policy, T = temperature
//
// This version uses fixed exponential-recency position weights where HTAM attends with learned
// weights; the full policy (provenance discounts, state summary s_t) is a later issue.
// Only directions with at least one strategy for the backend that passes the caller's
// applicability predicate are eligible. Sampling uses only the caller's std::mt19937_64 (its raw
// 64-bit outputs, no std:: distributions), so a fixed seed gives the same choice on every platform.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "memory/htg.h"
#include "memory/store.h"

namespace kforge::memory {

struct PolicyConfig {
  double temperature = 0.5;  // softmax temperature T over scores; > 0, larger explores more
  int prefix_length = 3;     // how many recent directions attend (k at most); >= 0
  double recency = 1.0;      // slope of the position logits; >= 0, 0 weighs all equally
  // b: bonus for rarely tried directions, b / sqrt(1 + attempts). 0.1 ~ ln(1.1): an untried
  // direction gets the benefit of a doubt worth about a 10% speedup, fading as it is tried.
  double exploration_bonus = 0.1;
};

/// True when a strategy can be applied to the current candidate (e.g. its edits name parameters
/// the kernel family has). Called once per strategy per choice.
using StrategyFilter = std::function<bool(const Strategy&)>;

/// The score of one eligible direction, split into the terms of the formula above.
struct DirectionScore {
  std::string direction_id;
  double prior = 0.0;
  double node_term = 0.0;
  double transition_term = 0.0;
  double score = 0.0;        // prior + node_term + transition_term
  double probability = 0.0;  // softmax(score / temperature) over eligible directions
};

/// What a selector picked: an index into its candidates and a one-line reason.
struct StrategyPick {
  std::size_t index = 0;
  std::string explanation;
};

/// Chooses a strategy among applicable candidates of one direction.
class StrategySelector {
 public:
  virtual ~StrategySelector() = default;
  /// `candidates` is non-empty. Returns an index < candidates.size(). Uses only `rng` for chance.
  virtual StrategyPick select(std::span<const Strategy> candidates, std::mt19937_64& rng) = 0;
};

/// UCB1 (Auer, Cesa-Bianchi and Fischer 2002, "Finite-time analysis of the multiarmed bandit
/// problem", policy UCB1): untried strategies first (uniformly at random among them), then
/// argmax mean_log_gain_i + c * sqrt(ln N / n_i), with N the attempts of all candidates and n_i
/// those of strategy i; ties broken uniformly at random.
class Ucb1Selector final : public StrategySelector {
 public:
  /// c = sqrt(2) is Auer et al.'s constant for rewards in a unit range; per-step log gains mostly
  /// lie within [-0.5, 0.5], a range of about 1.
  explicit Ucb1Selector(double exploration = 1.4142135623730951);
  StrategyPick select(std::span<const Strategy> candidates, std::mt19937_64& rng) override;

 private:
  double exploration_;
};

/// A direction, a strategy under it, and why.
struct PolicyChoice {
  Direction direction;
  Strategy strategy;
  std::vector<DirectionScore> scores;  // every eligible direction, in store order
  std::string explanation;             // one line per decision, for --explain
};

class Policy {
 public:
  /// Throws Error when `config` is out of range (temperature <= 0 or not finite, negative
  /// prefix_length, recency or exploration_bonus). Keeps references to `store` and `selector`.
  Policy(Store& store, StrategySelector& selector, PolicyConfig config = {});

  /// Scores every eligible direction of `backend` after `prefix` (most recent last); empty when
  /// none is eligible. Reads the store; errors are the store's.
  std::vector<DirectionScore> score_directions(const std::string& backend,
                                               std::span<const std::string> prefix,
                                               const StrategyFilter& applicable);

  /// Samples a direction from the softmax policy, then asks the selector for an applicable
  /// strategy under it. nullopt when no direction is eligible.
  std::optional<PolicyChoice> choose(const std::string& backend,
                                     std::span<const std::string> prefix,
                                     const StrategyFilter& applicable, std::mt19937_64& rng);

 private:
  struct Candidate {
    Direction direction;
    std::vector<Strategy> strategies;  // applicable ones only
  };
  std::vector<Candidate> eligible(const std::string& backend, const StrategyFilter& applicable);
  DirectionScore score(const Direction& direction, std::span<const std::string> prefix);
  std::vector<DirectionScore> score_all(const std::vector<Candidate>& candidates,
                                        std::span<const std::string> prefix);

  Store& store_;
  StrategySelector& selector_;
  PolicyConfig config_;
};

/// The position weights w_1..w_count of the formula above (w_1 for the most recent step); they
/// sum to 1. Empty for count <= 0.
std::vector<double> position_weights(int count, double recency);

/// softmax(scores / temperature), computed stably; temperature > 0.
std::vector<double> softmax(std::span<const double> scores, double temperature);

/// Draws an index with the given probabilities (non-negative, summing to ~1) from one rng output.
std::size_t sample_index(std::span<const double> probabilities, std::mt19937_64& rng);

}  // namespace kforge::memory

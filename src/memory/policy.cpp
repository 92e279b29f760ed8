#include "memory/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/error.h"

namespace kforge::memory {
namespace {

/// A uniform double in [0, 1) from the top 53 bits of one rng output (portable, unlike
/// std::uniform_real_distribution whose algorithm differs between standard libraries).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::string format(const char* pattern, double value) {
  char text[32];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string describe(const DirectionScore& s) {
  std::string name = s.strategy_id.empty() ? s.direction_id : s.strategy_id;
  return name + " " + format("%.3f", s.score) + " = prior " + format("%.3f", s.prior) + " + node " +
         format("%.3f", s.node_term) + " + transition " + format("%.3f", s.transition_term) +
         " (p " + format("%.2f", s.probability) + ")";
}

std::string ranking(std::vector<DirectionScore> scores) {
  std::stable_sort(scores.begin(), scores.end(),
                   [](const auto& a, const auto& b) { return a.probability > b.probability; });
  std::string text;
  for (const DirectionScore& s : scores) text += (text.empty() ? "" : "; ") + describe(s);
  return text;
}

std::string joined(std::span<const std::string> ids) {
  std::string text;
  for (const std::string& id : ids) text += (text.empty() ? "" : ", ") + id;
  return text;
}

// Where in the run a choice was made, for --explain: "after memory_access, launch_config" (the
// last directions, oldest first) or "as the first direction".
std::string after(std::span<const std::string> prefix) {
  return prefix.empty() ? "as the first direction" : "after " + joined(prefix);
}

}  // namespace

std::vector<double> position_weights(int count, double recency) {
  std::vector<double> logits;
  for (int j = 0; j < count; ++j) logits.push_back(-recency * j);
  return softmax(logits, 1.0);
}

std::vector<double> softmax(std::span<const double> scores, double temperature) {
  if (scores.empty()) return {};
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> weights;
  double total = 0.0;
  for (double score : scores) {
    weights.push_back(std::exp((score - top) / temperature));
    total += weights.back();
  }
  for (double& weight : weights) weight /= total;
  return weights;
}

std::size_t sample_index(std::span<const double> probabilities, std::mt19937_64& rng) {
  const double u = uniform01(rng);
  double cumulative = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    if (probabilities[i] <= 0.0) continue;
    cumulative += probabilities[i];
    last_positive = i;
    if (u < cumulative) return i;
  }
  return last_positive;  // rounding left u above the total
}

std::size_t uniform_index(std::size_t count, std::mt19937_64& rng) {
  auto index = static_cast<std::size_t>(uniform01(rng) * static_cast<double>(count));
  return std::min(index, count - 1);
}

std::vector<std::size_t> triggered_or_all(std::span<const StrategyArm> arms) {
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < arms.size(); ++i) {
    if (arms[i].triggered) indices.push_back(i);
  }
  if (indices.empty()) {
    for (std::size_t i = 0; i < arms.size(); ++i) indices.push_back(i);
  }
  return indices;
}

Ucb1Selector::Ucb1Selector(double exploration) : exploration_(exploration) {}

StrategyPick Ucb1Selector::select(std::span<const StrategyArm> arms, const StateSummary&,
                                  std::mt19937_64& rng) {
  const std::vector<std::size_t> considered = triggered_or_all(arms);
  const std::string scope = considered.size() < arms.size()
                                ? std::to_string(considered.size()) + " of " +
                                      std::to_string(arms.size()) + " match the diagnosis"
                                : "no trigger preference";
  std::vector<std::size_t> untried;
  double total = 0.0;
  for (std::size_t i : considered) {
    total += arms[i].evidence.attempts;
    if (!(arms[i].evidence.attempts > 0.0)) untried.push_back(i);
  }
  if (!untried.empty()) {
    std::size_t index = untried[uniform_index(untried.size(), rng)];
    return {index, "ucb1: untried (" + std::to_string(untried.size()) + " untried; " + scope + ")"};
  }
  const double log_total = std::log1p(total);
  std::vector<double> values;
  for (std::size_t i : considered) {
    const WeightedStats& s = arms[i].evidence;
    values.push_back(s.mean_log_gain + exploration_ * std::sqrt(log_total / s.attempts));
  }
  const double best = *std::max_element(values.begin(), values.end());
  std::vector<std::size_t> tied;
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (values[k] >= best - 1e-12) tied.push_back(k);
  }
  const std::size_t k = tied[uniform_index(tied.size(), rng)];
  const WeightedStats& s = arms[considered[k]].evidence;
  return {considered[k], "ucb1: value " + format("%.3f", values[k]) + " = mean " +
                             format("%.3f", s.mean_log_gain) + " + bonus " +
                             format("%.3f", values[k] - s.mean_log_gain) + " (n " +
                             format("%.2f", s.attempts) + " of " + format("%.2f", total) +
                             (tied.size() > 1 ? ", tie of " + std::to_string(tied.size()) : "") +
                             "; " + scope + ")"};
}

StrategyPick UniformSelector::select(std::span<const StrategyArm> arms, const StateSummary&,
                                     std::mt19937_64& rng) {
  const std::vector<std::size_t> considered = triggered_or_all(arms);
  return {considered[uniform_index(considered.size(), rng)],
          "uniform among " + std::to_string(considered.size()) + " of " +
              std::to_string(arms.size()) + " (local memory ablated)"};
}

Policy::Policy(Store& store, StrategySelector& selector, PolicyConfig config)
    : store_(store), selector_(selector), config_(std::move(config)) {
  if (!(config_.temperature > 0.0) || !std::isfinite(config_.temperature)) {
    throw Error("policy: temperature must be a finite number > 0, got " +
                std::to_string(config_.temperature));
  }
  if (config_.prefix_length < 0 || config_.prefix_length > kMaxLag || !(config_.recency >= 0.0) ||
      !(config_.exploration_bonus >= 0.0)) {
    throw Error("policy: prefix_length must be in 0.." + std::to_string(kMaxLag) +
                ", recency and exploration_bonus >= 0");
  }
  config_.weights.validate();
}

std::vector<Policy::Candidate> Policy::eligible(const MemoryView& view, const StateSummary& state,
                                                const StrategyFilter& applicable) const {
  std::vector<Candidate> candidates;
  for (const Direction& direction : view.directions()) {
    Candidate candidate{direction, {}};
    for (Strategy& strategy : view.strategies(direction.id)) {
      if (!applicable(strategy)) continue;
      StrategyArm arm;
      arm.evidence = view.strategy_stats(strategy.id);
      arm.triggered = triggered(strategy, state.last_feedback);
      arm.strategy = std::move(strategy);
      candidate.arms.push_back(std::move(arm));
    }
    if (!candidate.arms.empty()) candidates.push_back(std::move(candidate));
  }
  return candidates;
}

double Policy::node_term(const WeightedStats& stats) const {
  return stats.ema_log_gain + config_.exploration_bonus / std::sqrt(1.0 + stats.attempts);
}

double Policy::transition_term(const MemoryView& view, const std::string& direction_id,
                               std::span<const std::string> prefix) const {
  const int window =
      config_.ablations.prefix ? std::min(config_.prefix_length, 1) : config_.prefix_length;
  const int k = std::min(window, static_cast<int>(prefix.size()));
  const std::vector<double> weights = position_weights(k, config_.recency);
  double term = 0.0;
  for (int j = 1; j <= k; ++j) {
    const std::string& previous = prefix[prefix.size() - static_cast<std::size_t>(j)];
    const Edge* edge = view.edge(previous, direction_id);
    const WeightedStats lag = view.edge_stats(previous, direction_id, j);
    double utility = 0.0;
    if (lag.attempts > 0.0) {
      utility = lag.mean_log_gain;
    } else if (edge != nullptr) {
      utility = edge->prior;
    }
    term += weights[static_cast<std::size_t>(j - 1)] * utility;
  }
  return term;
}

std::vector<DirectionScore> Policy::score_all(const MemoryView& view,
                                              const std::vector<Candidate>& candidates,
                                              const StateSummary& state) const {
  std::vector<DirectionScore> scores;
  std::vector<double> values;
  for (const Candidate& candidate : candidates) {
    const double transition = transition_term(view, candidate.direction.id, state.prefix);
    if (config_.ablations.hierarchy) {
      for (const StrategyArm& arm : candidate.arms) {
        DirectionScore s{candidate.direction.id,
                         arm.strategy.id,
                         0.0,
                         node_term(arm.evidence),
                         transition,
                         0.0,
                         0.0};
        s.score = s.node_term + s.transition_term;
        scores.push_back(s);
      }
    } else {
      DirectionScore s{candidate.direction.id,
                       "",
                       candidate.direction.prior,
                       node_term(view.direction_stats(candidate.direction.id)),
                       transition,
                       0.0,
                       0.0};
      s.score = s.prior + s.node_term + s.transition_term;
      scores.push_back(s);
    }
  }
  for (const DirectionScore& s : scores) values.push_back(s.score);
  const std::vector<double> probabilities = softmax(values, config_.temperature);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i].probability = probabilities[i];
  return scores;
}

std::vector<DirectionScore> Policy::score_directions(const StateSummary& state,
                                                     const StrategyFilter& applicable) {
  MemoryView view = MemoryView::load(store_, state.context, config_.weights);
  return score_all(view, eligible(view, state, applicable), state);
}

std::optional<PolicyChoice> Policy::choose_flat(const MemoryView& view,
                                                std::vector<Candidate>& candidates,
                                                const StateSummary& state,
                                                std::mt19937_64& rng) const {
  PolicyChoice choice;
  choice.scores = score_all(view, candidates, state);
  std::vector<double> probabilities;
  for (const DirectionScore& s : choice.scores) probabilities.push_back(s.probability);
  const DirectionScore& picked = choice.scores[sample_index(probabilities, rng)];
  for (Candidate& candidate : candidates) {
    for (StrategyArm& arm : candidate.arms) {
      if (arm.strategy.id != picked.strategy_id) continue;
      choice.direction = candidate.direction;
      choice.strategy = arm.strategy;
    }
  }
  choice.explanation = "strategy '" + choice.strategy.id + "' (hierarchy ablated) " +
                       after(state.prefix) + " at T " + format("%.2f", config_.temperature) +
                       ": " + ranking(choice.scores);
  return choice;
}

std::optional<PolicyChoice> Policy::choose(const StateSummary& state,
                                           const StrategyFilter& applicable, std::mt19937_64& rng) {
  MemoryView view = MemoryView::load(store_, state.context, config_.weights);
  std::vector<Candidate> candidates = eligible(view, state, applicable);
  if (candidates.empty()) return std::nullopt;
  if (config_.ablations.hierarchy) return choose_flat(view, candidates, state, rng);
  PolicyChoice choice;
  choice.scores = score_all(view, candidates, state);
  std::vector<double> probabilities;
  for (const DirectionScore& s : choice.scores) probabilities.push_back(s.probability);
  Candidate& chosen = candidates[sample_index(probabilities, rng)];
  StrategyPick pick = selector_.select(chosen.arms, state, rng);
  choice.direction = std::move(chosen.direction);
  choice.strategy = std::move(chosen.arms.at(pick.index).strategy);
  const std::string diagnosis = state.last_feedback.summary();
  choice.explanation = "direction '" + choice.direction.id + "' " + after(state.prefix) +
                       " at T " + format("%.2f", config_.temperature) + ": " +
                       ranking(choice.scores) + "\nstrategy '" + choice.strategy.id + "'" +
                       (diagnosis.empty() ? "" : " under [" + diagnosis + "]") + ": " +
                       pick.explanation;
  return choice;
}

}  // namespace kforge::memory

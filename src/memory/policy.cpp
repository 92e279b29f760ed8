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

std::size_t uniform_index(std::size_t count, std::mt19937_64& rng) {
  auto index = static_cast<std::size_t>(uniform01(rng) * static_cast<double>(count));
  return std::min(index, count - 1);
}

std::string format(const char* pattern, double value) {
  char text[32];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

bool fits_backend(const Strategy& strategy, const std::string& backend) {
  return strategy.backends.empty() || std::find(strategy.backends.begin(), strategy.backends.end(),
                                                backend) != strategy.backends.end();
}

std::string describe(const DirectionScore& s) {
  return s.direction_id + " " + format("%.3f", s.score) + " = prior " + format("%.3f", s.prior) +
         " + node " + format("%.3f", s.node_term) + " + transition " +
         format("%.3f", s.transition_term) + " (p " + format("%.2f", s.probability) + ")";
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

Ucb1Selector::Ucb1Selector(double exploration) : exploration_(exploration) {}

StrategyPick Ucb1Selector::select(std::span<const Strategy> candidates, std::mt19937_64& rng) {
  std::vector<std::size_t> untried;
  int64_t total_attempts = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    total_attempts += candidates[i].stats.attempts;
    if (candidates[i].stats.attempts == 0) untried.push_back(i);
  }
  if (!untried.empty()) {
    std::size_t index = untried[uniform_index(untried.size(), rng)];
    return {index, "ucb1: untried (" + std::to_string(untried.size()) + " of " +
                       std::to_string(candidates.size()) + " untried)"};
  }
  const double log_total = std::log(static_cast<double>(total_attempts));
  std::vector<double> values;
  for (const Strategy& s : candidates) {
    values.push_back(s.stats.mean_log_gain +
                     exploration_ * std::sqrt(log_total / static_cast<double>(s.stats.attempts)));
  }
  const double best = *std::max_element(values.begin(), values.end());
  std::vector<std::size_t> tied;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= best - 1e-12) tied.push_back(i);
  }
  const std::size_t index = tied[uniform_index(tied.size(), rng)];
  const Stats& stats = candidates[index].stats;
  return {index, "ucb1: value " + format("%.3f", values[index]) + " = mean " +
                     format("%.3f", stats.mean_log_gain) + " + bonus " +
                     format("%.3f", values[index] - stats.mean_log_gain) + " (n " +
                     std::to_string(stats.attempts) + " of " + std::to_string(total_attempts) +
                     (tied.size() > 1 ? ", tie of " + std::to_string(tied.size()) : "") + ")"};
}

Policy::Policy(Store& store, StrategySelector& selector, PolicyConfig config)
    : store_(store), selector_(selector), config_(config) {
  if (!(config_.temperature > 0.0) || !std::isfinite(config_.temperature)) {
    throw Error("policy: temperature must be a finite number > 0, got " +
                std::to_string(config_.temperature));
  }
  if (config_.prefix_length < 0 || !(config_.recency >= 0.0) ||
      !(config_.exploration_bonus >= 0.0)) {
    throw Error("policy: prefix_length, recency and exploration_bonus must be >= 0");
  }
}

std::vector<Policy::Candidate> Policy::eligible(const std::string& backend,
                                                const StrategyFilter& applicable) {
  std::vector<Candidate> candidates;
  for (Direction& direction : store_.directions(backend)) {
    Candidate candidate{std::move(direction), {}};
    for (Strategy& strategy : store_.strategies(candidate.direction.id)) {
      if (fits_backend(strategy, backend) && applicable(strategy)) {
        candidate.strategies.push_back(std::move(strategy));
      }
    }
    if (!candidate.strategies.empty()) candidates.push_back(std::move(candidate));
  }
  return candidates;
}

DirectionScore Policy::score(const Direction& direction, std::span<const std::string> prefix) {
  DirectionScore result;
  result.direction_id = direction.id;
  result.prior = direction.prior;
  result.node_term =
      direction.stats.ema_log_gain +
      config_.exploration_bonus / std::sqrt(1.0 + static_cast<double>(direction.stats.attempts));
  const int k = std::min(config_.prefix_length, static_cast<int>(prefix.size()));
  const std::vector<double> weights = position_weights(k, config_.recency);
  for (int j = 0; j < k; ++j) {
    const std::string& previous = prefix[prefix.size() - 1 - static_cast<std::size_t>(j)];
    std::optional<Edge> edge = store_.edge(previous, direction.id);
    if (!edge.has_value()) continue;
    const double utility = edge->stats.attempts > 0 ? edge->stats.mean_log_gain : edge->prior;
    result.transition_term += weights[static_cast<std::size_t>(j)] * utility;
  }
  result.score = result.prior + result.node_term + result.transition_term;
  return result;
}

std::vector<DirectionScore> Policy::score_all(const std::vector<Candidate>& candidates,
                                              std::span<const std::string> prefix) {
  std::vector<DirectionScore> scores;
  std::vector<double> values;
  for (const Candidate& candidate : candidates) {
    scores.push_back(score(candidate.direction, prefix));
    values.push_back(scores.back().score);
  }
  const std::vector<double> probabilities = softmax(values, config_.temperature);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i].probability = probabilities[i];
  return scores;
}

std::vector<DirectionScore> Policy::score_directions(const std::string& backend,
                                                     std::span<const std::string> prefix,
                                                     const StrategyFilter& applicable) {
  return score_all(eligible(backend, applicable), prefix);
}

std::optional<PolicyChoice> Policy::choose(const std::string& backend,
                                           std::span<const std::string> prefix,
                                           const StrategyFilter& applicable, std::mt19937_64& rng) {
  std::vector<Candidate> candidates = eligible(backend, applicable);
  if (candidates.empty()) return std::nullopt;
  PolicyChoice choice;
  choice.scores = score_all(candidates, prefix);
  std::vector<double> probabilities;
  for (const DirectionScore& s : choice.scores) probabilities.push_back(s.probability);
  Candidate& chosen = candidates[sample_index(probabilities, rng)];
  StrategyPick pick = selector_.select(chosen.strategies, rng);
  choice.direction = std::move(chosen.direction);
  choice.strategy = std::move(chosen.strategies.at(pick.index));

  std::vector<DirectionScore> ranked = choice.scores;  // most probable first for reading
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.probability > b.probability; });
  std::string ranking;
  for (const DirectionScore& s : ranked) {
    ranking += (ranking.empty() ? "" : "; ") + describe(s);
  }
  std::string history;
  for (const std::string& id : prefix) history += (history.empty() ? "" : ", ") + id;
  choice.explanation = "direction '" + choice.direction.id + "' after [" + history + "] at T " +
                       format("%.2f", config_.temperature) + ": " + ranking + "\nstrategy '" +
                       choice.strategy.id + "': " + pick.explanation;
  return choice;
}

}  // namespace kforge::memory

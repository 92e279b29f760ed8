#include "memory/baselines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "common/error.h"

namespace kforge::memory {
namespace {

struct Pair {
  Direction direction;
  Strategy strategy;
};

bool fits_backend(const Strategy& strategy, const std::string& backend) {
  return strategy.backends.empty() || std::find(strategy.backends.begin(), strategy.backends.end(),
                                                backend) != strategy.backends.end();
}

// Every applicable (direction, strategy) of the backend, in store order; reads no evidence.
std::vector<Pair> applicable_pairs(Store& store, const std::string& backend,
                                   const StrategyFilter& applicable) {
  std::vector<Pair> pairs;
  for (const Direction& direction : store.directions(backend)) {
    for (Strategy& strategy : store.strategies(direction.id)) {
      if (fits_backend(strategy, backend) && applicable(strategy)) {
        pairs.push_back({direction, std::move(strategy)});
      }
    }
  }
  return pairs;
}

PolicyChoice choice_of(Pair pair, std::string explanation) {
  PolicyChoice choice;
  choice.direction = std::move(pair.direction);
  choice.strategy = std::move(pair.strategy);
  choice.explanation = std::move(explanation);
  return choice;
}

std::string format(const char* pattern, double value) {
  char text[32];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

PolicyKind parse_policy_kind(const std::string& name) {
  if (name == "htam") return PolicyKind::htam;
  if (name == "flat") return PolicyKind::flat;
  if (name == "feedback") return PolicyKind::feedback;
  if (name == "oneshot") return PolicyKind::oneshot;
  if (name == "random") return PolicyKind::random;
  throw Error("unknown policy '" + name + "' (expected htam, flat, feedback, oneshot or random)");
}

std::string to_string(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::htam:
      return "htam";
    case PolicyKind::flat:
      return "flat";
    case PolicyKind::feedback:
      return "feedback";
    case PolicyKind::oneshot:
      return "oneshot";
    case PolicyKind::random:
      return "random";
  }
  return "htam";
}

Ablations parse_ablations(const std::vector<std::string>& names) {
  Ablations ablations;
  for (const std::string& entry : names) {
    std::stringstream list(entry);
    std::string name;
    while (std::getline(list, name, ',')) {
      if (name == "hierarchy") {
        ablations.hierarchy = true;
      } else if (name == "local-memory") {
        ablations.local_memory = true;
      } else if (name == "prefix") {
        ablations.prefix = true;
      } else {
        throw Error("unknown ablation '" + name + "' (expected hierarchy, local-memory or prefix)");
      }
    }
  }
  return ablations;
}

std::string to_string(const Ablations& ablations) {
  std::string text;
  auto add = [&](bool on, const char* name) {
    if (on) text += (text.empty() ? "" : ",") + std::string(name);
  };
  add(ablations.hierarchy, "hierarchy");
  add(ablations.local_memory, "local-memory");
  add(ablations.prefix, "prefix");
  return text;
}

namespace {

// Owns the selector a Policy keeps a reference to.
class OwningHtam final : public SearchPolicy {
 public:
  OwningHtam(Store& store, const PolicyConfig& config, StrategySelector* external)
      : selector_(config.ablations.local_memory
                      ? std::unique_ptr<StrategySelector>(std::make_unique<UniformSelector>())
                      : std::make_unique<Ucb1Selector>()),
        policy_(store,
                external != nullptr && !config.ablations.local_memory ? *external : *selector_,
                config) {}
  std::string name() const override { return policy_.name(); }
  std::optional<PolicyChoice> choose(const StateSummary& state, const StrategyFilter& applicable,
                                     std::mt19937_64& rng) override {
    return policy_.choose(state, applicable, rng);
  }

 private:
  std::unique_ptr<StrategySelector> selector_;
  Policy policy_;
};

}  // namespace

std::unique_ptr<SearchPolicy> make_search_policy(PolicyKind kind, Store& store,
                                                 const PolicyConfig& config,
                                                 StrategySelector* selector) {
  const std::string ablated = to_string(config.ablations);
  if (kind != PolicyKind::htam && !ablated.empty()) {
    throw Error("--ablate " + ablated + " applies to --policy htam only, not " + to_string(kind));
  }
  switch (kind) {
    case PolicyKind::htam:
      return std::make_unique<OwningHtam>(store, config, selector);
    case PolicyKind::flat:
      return std::make_unique<FlatPolicy>(store, config);
    case PolicyKind::feedback:
      return std::make_unique<FeedbackPolicy>(store);
    case PolicyKind::oneshot:
    case PolicyKind::random:
      return std::make_unique<UniformPolicy>(store, to_string(kind));
  }
  throw Error("unknown policy kind");
}

FlatPolicy::FlatPolicy(Store& store, PolicyConfig config)
    : store_(store), config_(std::move(config)) {
  if (!(config_.temperature > 0.0) || !std::isfinite(config_.temperature)) {
    throw Error("policy: temperature must be a finite number > 0");
  }
  config_.weights.validate();
}

std::optional<PolicyChoice> FlatPolicy::choose(const StateSummary& state,
                                               const StrategyFilter& applicable,
                                               std::mt19937_64& rng) {
  MemoryView view = MemoryView::load(store_, state.context, config_.weights);
  std::vector<Pair> pairs;
  std::vector<DirectionScore> scores;
  std::vector<double> values;
  for (const Direction& direction : view.directions()) {
    for (Strategy& strategy : view.strategies(direction.id)) {
      if (!applicable(strategy)) continue;
      const WeightedStats stats = view.strategy_stats(strategy.id);
      DirectionScore s;
      s.direction_id = direction.id;
      s.strategy_id = strategy.id;
      s.node_term =
          stats.mean_log_gain + config_.exploration_bonus / std::sqrt(1.0 + stats.attempts);
      s.score = s.node_term;
      scores.push_back(s);
      values.push_back(s.score);
      pairs.push_back({direction, std::move(strategy)});
    }
  }
  if (pairs.empty()) return std::nullopt;
  const std::vector<double> probabilities = softmax(values, config_.temperature);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i].probability = probabilities[i];
  const std::size_t index = sample_index(probabilities, rng);
  PolicyChoice choice = choice_of(
      std::move(pairs[index]),
      "flat retrieval: strategy score " + format("%.3f", scores[index].score) + " (p " +
          format("%.2f", scores[index].probability) + ") among " + std::to_string(scores.size()));
  choice.scores = std::move(scores);
  return choice;
}

FeedbackPolicy::FeedbackPolicy(Store& store) : store_(store) {}

std::optional<PolicyChoice> FeedbackPolicy::choose(const StateSummary& state,
                                                   const StrategyFilter& applicable,
                                                   std::mt19937_64& rng) {
  std::vector<Pair> pairs = applicable_pairs(store_, state.context.backend, applicable);
  if (pairs.empty()) return std::nullopt;
  const Diagnosis& last = state.last_feedback;
  const bool improved = last.verdict == "ok" && last.log_gain && *last.log_gain > 0.0;
  const bool stay = improved && !state.last_direction_id.empty();
  std::vector<std::size_t> preferred;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const bool same = pairs[i].direction.id == state.last_direction_id;
    if (same == stay) preferred.push_back(i);
  }
  if (preferred.empty()) {
    for (std::size_t i = 0; i < pairs.size(); ++i) preferred.push_back(i);
  }
  std::vector<std::size_t> matched;
  for (std::size_t i : preferred) {
    if (triggered(pairs[i].strategy, last)) matched.push_back(i);
  }
  const std::vector<std::size_t>& pool = matched.empty() ? preferred : matched;
  const std::size_t index = pool[uniform_index(pool.size(), rng)];
  return choice_of(std::move(pairs[index]),
                   std::string("feedback: ") +
                       (stay ? "last step improved, stay in '" + state.last_direction_id + "'"
                             : "move to another direction") +
                       " (uniform among " + std::to_string(pool.size()) +
                       (matched.empty() ? "" : " trigger-matched") + ")");
}

UniformPolicy::UniformPolicy(Store& store, std::string name)
    : store_(store), name_(std::move(name)) {}

std::optional<PolicyChoice> UniformPolicy::choose(const StateSummary& state,
                                                  const StrategyFilter& applicable,
                                                  std::mt19937_64& rng) {
  std::vector<Pair> pairs = applicable_pairs(store_, state.context.backend, applicable);
  if (pairs.empty()) return std::nullopt;
  const std::size_t index = uniform_index(pairs.size(), rng);
  return choice_of(std::move(pairs[index]),
                   name_ + ": uniform among " + std::to_string(pairs.size()) + " strategies");
}

}  // namespace kforge::memory

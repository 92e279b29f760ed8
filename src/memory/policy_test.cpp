#include "memory/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "common/error.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

/// An in-memory Store: directions and strategies in insertion order, edges by (from, to).
class FakeStore : public Store {
 public:
  Direction& add_direction(const std::string& id, double prior, int strategy_count = 2,
                           const std::string& backend = "cuda") {
    directions_.push_back({});
    Direction& d = directions_.back();
    d.id = id;
    d.prior = prior;
    d.backends = {backend};
    for (int i = 0; i < strategy_count; ++i) {
      Strategy s;
      s.id = id + "_s" + std::to_string(i);
      s.direction_id = id;
      s.backends = {backend};
      strategies_.push_back(s);
    }
    return d;
  }
  Edge& add_edge(const std::string& from, const std::string& to, double prior) {
    Edge& e = edges_[{from, to}];
    e.from_direction = from;
    e.to_direction = to;
    e.prior = prior;
    return e;
  }

  std::vector<Direction> directions(const std::string& backend) override {
    std::vector<Direction> result;
    for (const Direction& d : directions_) {
      if (std::find(d.backends.begin(), d.backends.end(), backend) != d.backends.end()) {
        result.push_back(d);
      }
    }
    return result;
  }
  std::vector<Strategy> strategies(const std::string& direction_id) override {
    std::vector<Strategy> result;
    for (const Strategy& s : strategies_) {
      if (s.direction_id == direction_id) result.push_back(s);
    }
    return result;
  }
  std::optional<Edge> edge(const std::string& from, const std::string& to) override {
    auto it = edges_.find({from, to});
    if (it == edges_.end()) return std::nullopt;
    return it->second;
  }
  void record(const Evidence& evidence) override { evidence_.push_back(evidence); }
  int64_t evidence_count() override { return static_cast<int64_t>(evidence_.size()); }

  std::vector<Direction> directions_;
  std::vector<Strategy> strategies_;
  std::map<std::pair<std::string, std::string>, Edge> edges_;
  std::vector<Evidence> evidence_;
};

bool any_strategy(const Strategy&) { return true; }

double probability_of(const std::vector<DirectionScore>& scores, const std::string& id) {
  for (const DirectionScore& s : scores) {
    if (s.direction_id == id) return s.probability;
  }
  return -1.0;
}

/// How often each direction is chosen in `draws` choices from one seeded rng.
std::map<std::string, int> tally(Policy& policy, const std::vector<std::string>& prefix, int draws,
                                 uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::map<std::string, int> counts;
  for (int i = 0; i < draws; ++i) {
    ++counts[policy.choose("cuda", prefix, any_strategy, rng)->direction.id];
  }
  return counts;
}

TEST(PositionWeights, SumToOneAndFavourRecentSteps) {
  std::vector<double> w = position_weights(3, 1.0);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-12);
  EXPECT_GT(w[0], w[1]);
  EXPECT_GT(w[1], w[2]);
  EXPECT_NEAR(w[0] / w[1], std::exp(1.0), 1e-12);
  for (double uniform : position_weights(4, 0.0)) EXPECT_NEAR(uniform, 0.25, 1e-12);
  EXPECT_TRUE(position_weights(0, 1.0).empty());
}

TEST(Policy, SameSeedGivesTheSameChoices) {
  FakeStore store;
  for (const char* id : {"a", "b", "c", "d"}) store.add_direction(id, 0.1, 3);
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::string> picks;
    for (int i = 0; i < 30; ++i) {
      auto choice = policy.choose("cuda", {}, any_strategy, rng);
      picks.push_back(choice->direction.id + "/" + choice->strategy.id);
    }
    return picks;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Policy, PrefersTheDirectionWithHighEdgeUtility) {
  FakeStore store;
  store.add_direction("previous", 0.1);
  store.add_direction("plain", 0.1);
  store.add_direction("promising", 0.1);
  Edge& edge = store.add_edge("previous", "promising", 0.0);
  edge.stats.attempts = 4;
  edge.stats.mean_log_gain = 0.7;
  Ucb1Selector selector;
  Policy policy(store, selector);
  std::vector<std::string> prefix = {"previous"};
  auto scores = policy.score_directions("cuda", prefix, any_strategy);
  EXPECT_GT(probability_of(scores, "promising"), probability_of(scores, "plain") * 3);
  auto counts = tally(policy, prefix, 2000);
  EXPECT_GT(counts["promising"], 1200);
  std::mt19937_64 rng(1);
  std::string explanation = policy.choose("cuda", prefix, any_strategy, rng)->explanation;
  EXPECT_NE(explanation.find("promising"), std::string::npos) << explanation;
  EXPECT_NE(explanation.find("ucb1"), std::string::npos) << explanation;
}

TEST(Policy, UsesEdgePriorUntilTheEdgeIsAttempted) {
  FakeStore store;
  store.add_direction("p", 0.0);
  store.add_direction("g", 0.0);
  Edge& edge = store.add_edge("p", "g", 0.4);
  Ucb1Selector selector;
  Policy policy(store, selector, {.temperature = 0.5, .prefix_length = 3, .recency = 1.0});
  std::vector<std::string> prefix = {"p"};
  auto transition = [&] {
    for (const DirectionScore& s : policy.score_directions("cuda", prefix, any_strategy)) {
      if (s.direction_id == "g") return s.transition_term;
    }
    return -99.0;
  };
  EXPECT_NEAR(transition(), 0.4, 1e-12);
  edge.stats.attempts = 2;
  edge.stats.mean_log_gain = -0.2;
  EXPECT_NEAR(transition(), -0.2, 1e-12);
}

TEST(Policy, RecentStepsWeighMoreAndPrefixLengthLimitsTheWindow) {
  FakeStore store;
  for (const char* id : {"x", "y", "a", "b"}) store.add_direction(id, 0.0);
  store.add_edge("x", "a", 0.5);  // older step
  store.add_edge("y", "b", 0.5);  // most recent step
  Ucb1Selector selector;
  std::vector<std::string> prefix = {"x", "y"};
  auto term = [&](const PolicyConfig& config, const std::string& id) {
    Policy policy(store, selector, config);
    for (const DirectionScore& s : policy.score_directions("cuda", prefix, any_strategy)) {
      if (s.direction_id == id) return s.transition_term;
    }
    return -99.0;
  };
  EXPECT_GT(term({.recency = 1.0}, "b"), term({.recency = 1.0}, "a"));
  EXPECT_NEAR(term({.recency = 0.0}, "b"), term({.recency = 0.0}, "a"), 1e-12);
  EXPECT_NEAR(term({.prefix_length = 1}, "a"), 0.0, 1e-12);
  EXPECT_NEAR(term({.prefix_length = 1}, "b"), 0.5, 1e-12);
}

TEST(Policy, NodeTermRewardsTrendAndExploresUntriedDirections) {
  FakeStore store;
  store.add_direction("tried", 0.0).stats.attempts = 8;
  store.add_direction("fresh", 0.0);
  Direction& trending = store.add_direction("trending", 0.0);
  trending.stats.attempts = 8;
  trending.stats.ema_log_gain = 0.3;
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto scores = policy.score_directions("cuda", {}, any_strategy);
  EXPECT_GT(probability_of(scores, "fresh"), probability_of(scores, "tried"));
  EXPECT_GT(probability_of(scores, "trending"), probability_of(scores, "fresh"));
}

TEST(Policy, TemperatureControlsExploration) {
  FakeStore store;
  store.add_direction("best", 0.3);
  store.add_direction("worse", 0.1);
  store.add_direction("worst", 0.0);
  Ucb1Selector selector;
  Policy greedy(store, selector, {.temperature = 0.01});
  Policy balanced(store, selector, {.temperature = 0.5});
  Policy flat(store, selector, {.temperature = 100.0});
  EXPECT_GT(probability_of(greedy.score_directions("cuda", {}, any_strategy), "best"), 0.999);
  double middle = probability_of(balanced.score_directions("cuda", {}, any_strategy), "best");
  EXPECT_GT(middle, 0.4);
  EXPECT_LT(middle, 0.9);
  for (const DirectionScore& s : flat.score_directions("cuda", {}, any_strategy)) {
    EXPECT_NEAR(s.probability, 1.0 / 3.0, 0.01) << s.direction_id;
  }
  EXPECT_EQ(tally(greedy, {}, 200)["best"], 200);
}

TEST(Policy, OnlyDirectionsWithAnApplicableStrategyOfTheBackendAreEligible) {
  FakeStore store;
  store.add_direction("keep", 0.0);
  store.add_direction("filtered", 0.9);
  store.add_direction("cpu_only", 0.9, 2, "cpu");
  Strategy cpu_strategy;
  cpu_strategy.id = "cpu_strategy";
  cpu_strategy.direction_id = "keep";
  cpu_strategy.backends = {"cpu"};
  store.strategies_.push_back(cpu_strategy);
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto applicable = [](const Strategy& s) { return s.direction_id != "filtered"; };
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50; ++i) {
    auto choice = policy.choose("cuda", {}, applicable, rng);
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->direction.id, "keep");
    EXPECT_NE(choice->strategy.id, "cpu_strategy");
    EXPECT_EQ(choice->scores.size(), 1u);
  }
  auto nothing = [](const Strategy&) { return false; };
  EXPECT_FALSE(policy.choose("cuda", {}, nothing, rng).has_value());
  EXPECT_TRUE(policy.score_directions("cuda", {}, nothing).empty());
}

TEST(Policy, RejectsInvalidConfiguration) {
  FakeStore store;
  Ucb1Selector selector;
  EXPECT_THROW(Policy(store, selector, {.temperature = 0.0}), Error);
  EXPECT_THROW(Policy(store, selector, {.prefix_length = -1}), Error);
  EXPECT_THROW(Policy(store, selector, {.recency = -1.0}), Error);
}

std::vector<Strategy> arms(const std::vector<std::pair<int64_t, double>>& attempts_and_mean) {
  std::vector<Strategy> result;
  for (const auto& [attempts, mean] : attempts_and_mean) {
    Strategy s;
    s.id = "s" + std::to_string(result.size());
    s.stats.attempts = attempts;
    s.stats.mean_log_gain = mean;
    result.push_back(s);
  }
  return result;
}

TEST(Ucb1Selector, TriesUntriedStrategiesFirst) {
  Ucb1Selector selector;
  std::vector<Strategy> candidates = arms({{3, 0.9}, {0, 0.0}, {5, 0.9}, {0, 0.0}});
  std::set<std::size_t> picked;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100; ++i) {
    StrategyPick pick = selector.select(candidates, rng);
    picked.insert(pick.index);
    EXPECT_NE(pick.explanation.find("untried"), std::string::npos);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{1, 3}));
}

TEST(Ucb1Selector, BalancesMeanAndConfidenceAndBreaksTiesWithTheRng) {
  Ucb1Selector selector;
  std::mt19937_64 rng(5);
  EXPECT_EQ(selector.select(arms({{10, 0.5}, {10, 0.0}}), rng).index, 0u);
  // ln(101) ~ 4.6: the rarely tried arm's bonus sqrt(2 * 4.6 / 1) ~ 3 outweighs a 0.1 mean.
  EXPECT_EQ(selector.select(arms({{100, 0.1}, {1, 0.0}}), rng).index, 1u);
  std::set<std::size_t> picked;
  for (int i = 0; i < 50; ++i) {
    picked.insert(selector.select(arms({{4, 0.2}, {4, 0.2}}), rng).index);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{0, 1}));
}

TEST(Policy, WorksOverTheSeededSqliteStore) {
#ifdef KFORGE_SOURCE_DIR
  std::filesystem::path seed = std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge/seed.toml";
#else
  std::filesystem::path seed = "knowledge/seed.toml";
#endif
  auto store = SqliteStore::open(":memory:", seed);
  Ucb1Selector selector;
  Policy policy(*store, selector);
  std::mt19937_64 rng(2024);
  std::vector<std::string> prefix;
  for (const char* backend : {"cuda", "cpu", "cuda", "cpu"}) {
    auto choice = policy.choose(backend, prefix, any_strategy, rng);
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->strategy.backends, std::vector<std::string>{backend});
    EXPECT_EQ(choice->strategy.direction_id, choice->direction.id);
    prefix.push_back(choice->direction.id);
  }
}

}  // namespace
}  // namespace kforge::memory

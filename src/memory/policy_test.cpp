#include "memory/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include "common/error.h"
#include "memory/fake_store_test_util.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

using testing::FakeStore;
using testing::kHere;

bool any_strategy(const Strategy&) { return true; }

StateSummary state_after(std::vector<std::string> prefix) {
  StateSummary state;
  state.context = kHere;
  state.prefix = std::move(prefix);
  return state;
}

const DirectionScore& score_of(const std::vector<DirectionScore>& scores, const std::string& id) {
  for (const DirectionScore& s : scores) {
    if (s.direction_id == id && s.strategy_id.empty()) return s;
    if (s.strategy_id == id) return s;
  }
  static DirectionScore missing;
  ADD_FAILURE() << "no score for " << id;
  return missing;
}

std::map<std::string, int> tally(Policy& policy, const StateSummary& state, int draws,
                                 uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::map<std::string, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[policy.choose(state, any_strategy, rng)->direction.id];
  return counts;
}

TEST(PositionWeights, AreASoftmaxOverPositionsWithRecencyBias) {
  // exp(0), exp(-1), exp(-2) over their sum 1.503214724...
  std::vector<double> w = position_weights(3, 1.0);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(w[0], 0.665240955775, 1e-9);
  EXPECT_NEAR(w[1], 0.244728471055, 1e-9);
  EXPECT_NEAR(w[2], 0.090030573170, 1e-9);
  for (double uniform : position_weights(4, 0.0)) EXPECT_NEAR(uniform, 0.25, 1e-12);
  EXPECT_TRUE(position_weights(0, 1.0).empty());
}

TEST(Softmax, DividesByTheTemperature) {
  // exp(1 / 0.5) / (exp(2) + exp(0)) = 7.389056 / 8.389056
  std::vector<double> scores = {1.0, 0.0};
  std::vector<double> p = softmax(scores, 0.5);
  EXPECT_NEAR(p[0], 0.880797077978, 1e-9);
  EXPECT_NEAR(p[1], 0.119202922022, 1e-9);
  std::vector<double> large = {1000.0, 999.0};  // stable: no overflow
  EXPECT_NEAR(softmax(large, 1.0)[0], 0.731058578630, 1e-9);
}

// The whole formula on numbers worked by hand:
//   A: prior 0.3; evidence gains 0.2 (no prefix), -0.1 (after z then x: lag 1 z, lag 2 x),
//      0.9 (after x: lag 1 x)
//   ema = 0.06 -> 0.06 + 0.3 * (-0.16) = 0.012 -> 0.012 + 0.3 * 0.888 = 0.2784
//   node = 0.2784 + 0.1 / sqrt(1 + 3) = 0.3284
//   prefix [x, y] (y most recent): lag 1 y -> A has no evidence, prior 0.2; lag 2 x -> A has
//   the -0.1 row (the 0.9 row is lag 1 and does not count at lag 2)
//   weights 1 / (1 + e^-1) = 0.731058578630, 0.268941421370
//   transition = 0.731058578630 * 0.2 + 0.268941421370 * (-0.1) = 0.119317573589
//   score = 0.3 + 0.3284 + 0.119317573589 = 0.747717573589
TEST(Policy, ScoresByTheFormulaWithPerLagEdgesAndPriorFallback) {
  FakeStore store;
  for (const char* id : {"x", "y", "z"}) store.add_direction(id, 0.0);
  store.add_direction("a", 0.3);
  store.add_edge("y", "a", 0.2);
  store.add_edge("x", "a", 0.5);
  store.attempt("a", "a_s0", 0.2);
  store.attempt("a", "a_s0", -0.1, {"z", "x"});
  store.attempt("a", "a_s1", 0.9, {"x"});
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto scores = policy.score_directions(state_after({"x", "y"}), any_strategy);
  const DirectionScore& a = score_of(scores, "a");
  EXPECT_NEAR(a.prior, 0.3, 1e-12);
  EXPECT_NEAR(a.node_term, 0.3284, 1e-12);
  EXPECT_NEAR(a.transition_term, 0.119317573589, 1e-9);
  EXPECT_NEAR(a.score, 0.747717573589, 1e-9);
  // An untried direction: node = 0.1 / sqrt(1) = 0.1, no edges.
  EXPECT_NEAR(score_of(scores, "z").score, 0.1, 1e-12);
  double total = 0.0;
  for (const DirectionScore& s : scores) total += s.probability;
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST(Policy, PrefixAblationAttendsToTheLastStepOnly) {
  FakeStore store;
  for (const char* id : {"x", "y"}) store.add_direction(id, 0.0);
  store.add_direction("a", 0.0);
  store.add_edge("y", "a", 0.2);
  store.add_edge("x", "a", 0.5);
  Ucb1Selector selector;
  PolicyConfig config;
  config.ablations.prefix = true;
  Policy markov(store, selector, config);
  Policy full(store, selector);
  StateSummary state = state_after({"x", "y"});
  EXPECT_NEAR(score_of(markov.score_directions(state, any_strategy), "a").transition_term, 0.2,
              1e-12);
  // 0.731058578630 * 0.2 + 0.268941421370 * 0.5
  EXPECT_NEAR(score_of(full.score_directions(state, any_strategy), "a").transition_term,
              0.280682426411, 1e-9);
}

TEST(Policy, EvidenceFromAnotherDeviceCountsDiscounted) {
  FakeStore store;
  store.add_direction("b", 0.0);
  Provenance elsewhere = kHere;
  elsewhere.device = "NVIDIA A100";
  store.attempt("b", "b_s0", 0.4, {}, elsewhere);
  Ucb1Selector selector;
  Policy policy(store, selector);
  // weight 0.5: n_w = 0.5, ema_w = 0.3 * 0.5 * 0.4 = 0.06, node = 0.06 + 0.1 / sqrt(1.5)
  EXPECT_NEAR(score_of(policy.score_directions(state_after({}), any_strategy), "b").node_term,
              0.06 + 0.1 / std::sqrt(1.5), 1e-12);
}

TEST(Policy, HierarchyAblationScoresStrategiesDirectly) {
  FakeStore store;
  store.add_direction("a", 0.9);
  store.attempt("a", "a_s0", 0.5);
  Ucb1Selector selector;
  PolicyConfig config;
  config.ablations.hierarchy = true;
  Policy policy(store, selector, config);
  auto scores = policy.score_directions(state_after({}), any_strategy);
  ASSERT_EQ(scores.size(), 2u);
  // a_s0: ema 0.15 + 0.1 / sqrt(2); a_s1 untried: 0.1; the direction prior is not used.
  EXPECT_NEAR(score_of(scores, "a_s0").score, 0.15 + 0.1 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(score_of(scores, "a_s1").score, 0.1, 1e-12);
  std::mt19937_64 rng(1);
  auto choice = policy.choose(state_after({}), any_strategy, rng);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->direction.id, "a");
  EXPECT_NE(choice->explanation.find("hierarchy ablated"), std::string::npos);
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
      auto choice = policy.choose(state_after({}), any_strategy, rng);
      picks.push_back(choice->direction.id + "/" + choice->strategy.id);
    }
    return picks;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Policy, LearnedTransitionsSteerTheChoice) {
  FakeStore store;
  store.add_direction("previous", 0.1);
  store.add_direction("plain", 0.1);
  store.add_direction("promising", 0.1);
  for (int i = 0; i < 4; ++i) store.attempt("promising", "promising_s0", 0.7, {"previous"});
  for (int i = 0; i < 4; ++i) store.attempt("plain", "plain_s0", 0.0, {"previous"});
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto counts = tally(policy, state_after({"previous"}), 1000);
  EXPECT_GT(counts["promising"], 800);
  std::mt19937_64 rng(1);
  std::string explanation =
      policy.choose(state_after({"previous"}), any_strategy, rng)->explanation;
  EXPECT_NE(explanation.find("promising"), std::string::npos) << explanation;
  EXPECT_NE(explanation.find("ucb1"), std::string::npos) << explanation;
}

TEST(Policy, TemperatureControlsExploration) {
  FakeStore store;
  store.add_direction("best", 0.3);
  store.add_direction("worse", 0.1);
  store.add_direction("worst", 0.0);
  Ucb1Selector selector;
  Policy greedy(store, selector, {.temperature = 0.01});
  Policy uniform(store, selector, {.temperature = 100.0});
  EXPECT_EQ(tally(greedy, state_after({}), 200)["best"], 200);
  for (const DirectionScore& s : uniform.score_directions(state_after({}), any_strategy)) {
    EXPECT_NEAR(s.probability, 1.0 / 3.0, 0.01) << s.direction_id;
  }
}

TEST(Policy, OnlyDirectionsWithAnApplicableStrategyOfTheBackendAreEligible) {
  FakeStore store;
  store.add_direction("keep", 0.0);
  store.add_direction("filtered", 0.9);
  store.add_direction("cpu_only", 0.9, 2, "cpu");
  Ucb1Selector selector;
  Policy policy(store, selector);
  auto applicable = [](const Strategy& s) { return s.direction_id != "filtered"; };
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20; ++i) {
    auto choice = policy.choose(state_after({}), applicable, rng);
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->direction.id, "keep");
  }
  auto nothing = [](const Strategy&) { return false; };
  EXPECT_FALSE(policy.choose(state_after({}), nothing, rng).has_value());
}

TEST(Policy, RejectsInvalidConfiguration) {
  FakeStore store;
  Ucb1Selector selector;
  EXPECT_THROW(Policy(store, selector, {.temperature = 0.0}), Error);
  EXPECT_THROW(Policy(store, selector, {.prefix_length = -1}), Error);
  EXPECT_THROW(Policy(store, selector, {.prefix_length = kMaxLag + 1}), Error);
  EXPECT_THROW(Policy(store, selector, {.recency = -1.0}), Error);
  PolicyConfig bad_weight;
  bad_weight.weights.other_device = 1.5;
  EXPECT_THROW(Policy(store, selector, bad_weight), Error);
}

std::vector<StrategyArm> arms(const std::vector<std::pair<double, double>>& attempts_and_mean,
                              std::set<std::size_t> triggered = {}) {
  std::vector<StrategyArm> result;
  for (const auto& [attempts, mean] : attempts_and_mean) {
    StrategyArm arm;
    arm.strategy.id = "s" + std::to_string(result.size());
    arm.evidence.attempts = attempts;
    arm.evidence.gain_weight = attempts;
    arm.evidence.mean_log_gain = mean;
    arm.triggered = triggered.count(result.size()) > 0;
    result.push_back(arm);
  }
  return result;
}

TEST(Ucb1Selector, TriesArmsWithoutEvidenceFirst) {
  Ucb1Selector selector;
  std::vector<StrategyArm> candidates = arms({{3, 0.9}, {0, 0.0}, {5, 0.9}, {0, 0.0}});
  std::set<std::size_t> picked;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100; ++i) {
    StrategyPick pick = selector.select(candidates, StateSummary{}, rng);
    picked.insert(pick.index);
    EXPECT_NE(pick.explanation.find("untried"), std::string::npos);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{1, 3}));
}

TEST(Ucb1Selector, ValueIsMeanPlusBonusOnWeightedCounts) {
  // N = 3: ln(4) = 1.386294; a: 0.1 + sqrt(2) * sqrt(1.386294 / 2) = 1.277410,
  // b: 0.3 + sqrt(2) * sqrt(1.386294 / 1) = 1.965109 -> b.
  Ucb1Selector selector;
  std::mt19937_64 rng(5);
  StrategyPick pick = selector.select(arms({{2, 0.1}, {1, 0.3}}), StateSummary{}, rng);
  EXPECT_EQ(pick.index, 1u);
  EXPECT_NE(pick.explanation.find("value 1.965"), std::string::npos) << pick.explanation;
  EXPECT_EQ(selector.select(arms({{10, 0.5}, {10, 0.0}}), StateSummary{}, rng).index, 0u);
  std::set<std::size_t> picked;
  for (int i = 0; i < 50; ++i) {
    picked.insert(selector.select(arms({{4, 0.2}, {4, 0.2}}), StateSummary{}, rng).index);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{0, 1}));
}

TEST(Ucb1Selector, PrefersArmsWhoseTriggersMatchTheDiagnosis) {
  Ucb1Selector selector;
  std::mt19937_64 rng(5);
  // Arm 0 has better evidence, but only arm 2's trigger matches.
  for (int i = 0; i < 20; ++i) {
    StrategyPick pick =
        selector.select(arms({{5, 0.9}, {5, 0.0}, {5, 0.1}}, {2}), StateSummary{}, rng);
    EXPECT_EQ(pick.index, 2u);
    EXPECT_NE(pick.explanation.find("1 of 3 match the diagnosis"), std::string::npos);
  }
}

TEST(UniformSelector, IgnoresEvidenceButKeepsTriggers) {
  UniformSelector selector;
  std::mt19937_64 rng(9);
  std::set<std::size_t> picked;
  for (int i = 0; i < 60; ++i) {
    picked.insert(
        selector.select(arms({{9, 0.9}, {0, 0.0}, {1, -0.5}}), StateSummary{}, rng).index);
  }
  EXPECT_EQ(picked, (std::set<std::size_t>{0, 1, 2}));
  EXPECT_EQ(selector.select(arms({{9, 0.9}, {0, 0.0}}, {1}), StateSummary{}, rng).index, 1u);
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
  for (const char* backend : {"cuda", "cpu", "cuda", "cpu"}) {
    StateSummary state = state_after({});
    state.context.backend = backend;
    auto choice = policy.choose(state, any_strategy, rng);
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->strategy.backends, std::vector<std::string>{backend});
    EXPECT_EQ(choice->strategy.direction_id, choice->direction.id);
    Evidence e;
    e.direction_id = choice->direction.id;
    e.strategy_id = choice->strategy.id;
    e.provenance = state.context;
    e.verdict = "ok";
    e.log_gain = 0.1;
    store->record(e);
  }
}

}  // namespace
}  // namespace kforge::memory

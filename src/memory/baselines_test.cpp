#include "memory/baselines.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/error.h"
#include "memory/fake_store_test_util.h"

namespace kforge::memory {
namespace {

using testing::FakeStore;
using testing::kHere;

bool any_strategy(const Strategy&) { return true; }

StateSummary fresh_state() {
  StateSummary state;
  state.context = kHere;
  return state;
}

TEST(PolicyNames, ParseAndPrint) {
  for (const char* name : {"htam", "flat", "feedback", "oneshot", "random"}) {
    EXPECT_EQ(to_string(parse_policy_kind(name)), name);
  }
  EXPECT_THROW(parse_policy_kind("greedy"), Error);
  Ablations a = parse_ablations({"hierarchy,prefix", "local-memory"});
  EXPECT_TRUE(a.hierarchy && a.prefix && a.local_memory);
  EXPECT_EQ(to_string(a), "hierarchy,local-memory,prefix");
  try {
    parse_ablations({"prefix,memory"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown ablation 'memory'"), std::string::npos);
  }
}

TEST(MakeSearchPolicy, BuildsEachKindAndRefusesAblationsOutsideHtam) {
  FakeStore store;
  store.add_direction("a", 0.0);
  for (PolicyKind kind : {PolicyKind::htam, PolicyKind::flat, PolicyKind::feedback,
                          PolicyKind::oneshot, PolicyKind::random}) {
    auto policy = make_search_policy(kind, store, PolicyConfig{});
    EXPECT_EQ(policy->name(), to_string(kind));
    std::mt19937_64 rng(1);
    EXPECT_TRUE(policy->choose(fresh_state(), any_strategy, rng).has_value());
  }
  PolicyConfig ablated;
  ablated.ablations.prefix = true;
  EXPECT_THROW(make_search_policy(PolicyKind::flat, store, ablated), Error);
  EXPECT_NO_THROW(make_search_policy(PolicyKind::htam, store, ablated));
}

TEST(FlatPolicy, RetrievesTheStrategyWithTheBestEvidenceIgnoringTransitions) {
  FakeStore store;
  store.add_direction("a", 0.9);
  store.add_direction("b", 0.0);
  store.add_edge("a", "a", 1.0);  // priors and edges mean nothing to flat retrieval
  for (int i = 0; i < 3; ++i) store.attempt("b", "b_s1", 0.5);
  for (const char* s : {"a_s0", "a_s1", "b_s0"}) store.attempt(s[0] == 'a' ? "a" : "b", s, 0.0);
  auto policy = make_search_policy(PolicyKind::flat, store, {.temperature = 0.05});
  std::mt19937_64 rng(3);
  StateSummary state = fresh_state();
  state.prefix = {"a"};
  std::map<std::string, int> counts;
  for (int i = 0; i < 100; ++i) ++counts[policy->choose(state, any_strategy, rng)->strategy.id];
  EXPECT_EQ(counts["b_s1"], 100);
}

TEST(FeedbackPolicy, StaysAfterAnImprovementAndMovesAfterAFailure) {
  FakeStore store;
  for (const char* id : {"a", "b", "c"}) store.add_direction(id, 0.0);
  store.attempt("a", "a_s0", 2.0);  // evidence is never read by feedback
  FeedbackPolicy policy(store);
  std::mt19937_64 rng(4);
  StateSummary state = fresh_state();
  state.last_direction_id = "b";
  state.last_feedback.verdict = "ok";
  state.last_feedback.log_gain = 0.1;
  for (int i = 0; i < 30; ++i)
    EXPECT_EQ(policy.choose(state, any_strategy, rng)->direction.id, "b");
  state.last_feedback.verdict = "wrong_answer";
  state.last_feedback.log_gain.reset();
  std::set<std::string> moved;
  for (int i = 0; i < 60; ++i) moved.insert(policy.choose(state, any_strategy, rng)->direction.id);
  EXPECT_EQ(moved, (std::set<std::string>{"a", "c"}));
}

TEST(UniformPolicy, IsUniformAndReproducible) {
  FakeStore store;
  store.add_direction("a", 0.9, 1);
  store.add_direction("b", 0.0, 3);
  UniformPolicy policy(store, "random");
  std::map<std::string, int> counts;
  std::mt19937_64 rng(8);
  for (int i = 0; i < 4000; ++i)
    ++counts[policy.choose(fresh_state(), any_strategy, rng)->strategy.id];
  for (const auto& [id, n] : counts) EXPECT_NEAR(n, 1000, 120) << id;
  std::mt19937_64 again(8), other(8);
  EXPECT_EQ(policy.choose(fresh_state(), any_strategy, again)->strategy.id,
            policy.choose(fresh_state(), any_strategy, other)->strategy.id);
}

}  // namespace
}  // namespace kforge::memory

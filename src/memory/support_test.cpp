#include "memory/support.h"

#include <gtest/gtest.h>

#include "memory/fake_store_test_util.h"

namespace kforge::memory {
namespace {
using testing::FakeStore;
using testing::kHere;

PolicyChoice chose(const std::string& direction, const std::string& strategy) {
  PolicyChoice choice;
  choice.direction.id = direction;
  choice.strategy.id = strategy;
  choice.strategy.direction_id = direction;
  DirectionScore score;
  score.direction_id = direction;
  score.probability = 0.6;
  choice.scores = {score};
  return choice;
}

class ChoiceSupportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.add_direction("memory_access", 0.1);
    store_.add_direction("data_reuse", 0.1);
    state_.context = kHere;
    state_.prefix = {"data_reuse"};  // chosen one step before
  }
  ChoiceSupport support(std::size_t prior_rows, const EvidenceReads& reads) {
    const MemoryView view = MemoryView::load(store_, kHere, ProvenanceWeights{});
    return choice_support(view, prior_rows, state_, chose("memory_access", "memory_access_s0"),
                          reads);
  }
  FakeStore store_;
  StateSummary state_;
};

TEST_F(ChoiceSupportTest, EarlierRunsRowsThatSpokeForTheChoiceAreMemory) {
  Provenance other_task = kHere;
  other_task.task_hash = "t2";
  store_.attempt("memory_access", "memory_access_s0", 0.2, {"data_reuse"});
  store_.attempt("memory_access", "memory_access_s1", 0.1, {"data_reuse"}, other_task);
  store_.attempt("memory_access", "memory_access_s0", -0.1);  // slower: against
  store_.attempt("data_reuse", "data_reuse_s0", 0.3);         // another direction: not read
  const ChoiceSupport s = support(4, evidence_reads(PolicyKind::htam, {}, 3));
  EXPECT_EQ(s.basis, "memory");
  EXPECT_EQ(s.prior_transitions, 2);
  EXPECT_EQ(s.prior_direction, 2);
  EXPECT_EQ(s.prior_strategy, 1);
  EXPECT_EQ(s.prior_against, 1);
  EXPECT_EQ(s.prior_tasks, 2);
  EXPECT_EQ(s.run_support, 0);
  EXPECT_DOUBLE_EQ(s.probability, 0.6);
}

TEST_F(ChoiceSupportTest, RowsWrittenSinceTheRunStartedAreThisRuns) {
  store_.attempt("memory_access", "memory_access_s0", 0.2, {"data_reuse"});
  const ChoiceSupport s = support(0, evidence_reads(PolicyKind::htam, {}, 3));
  EXPECT_EQ(s.basis, "this_run");
  EXPECT_EQ(s.run_support, 1);
  EXPECT_EQ(s.prior_transitions + s.prior_direction + s.prior_strategy, 0);
}

TEST_F(ChoiceSupportTest, NoSupportingRowIsExplorationAndPoliciesWithoutMemoryReadNone) {
  store_.attempt("memory_access", "memory_access_s0", -0.2, {"data_reuse"});
  EXPECT_EQ(support(1, evidence_reads(PolicyKind::htam, {}, 3)).basis, "explored");
  EXPECT_EQ(support(1, evidence_reads(PolicyKind::random, {}, 3)).basis, "no_memory");
  EXPECT_EQ(support(1, evidence_reads(PolicyKind::feedback, {}, 3)).basis, "no_memory");
}

TEST_F(ChoiceSupportTest, WhatEachPolicyReads) {
  // flat reads only the strategy's rows: a transition into the direction by another strategy
  // does not count for it.
  store_.attempt("memory_access", "memory_access_s1", 0.2, {"data_reuse"});
  EXPECT_EQ(support(1, evidence_reads(PolicyKind::flat, {}, 3)).basis, "explored");
  EXPECT_EQ(support(1, evidence_reads(PolicyKind::htam, {}, 3)).basis, "memory");
  Ablations local;
  local.local_memory = true;
  const EvidenceReads without_local = evidence_reads(PolicyKind::htam, local, 3);
  EXPECT_FALSE(without_local.strategy);
  EXPECT_TRUE(without_local.direction);
  Ablations prefix;
  prefix.prefix = true;
  EXPECT_EQ(evidence_reads(PolicyKind::htam, prefix, 3).transition_lags, 1);
}

TEST_F(ChoiceSupportTest, RoundTripsThroughJsonAndOldPlansReadAsDefaults) {
  ChoiceSupport s;
  s.basis = "memory";
  s.prior_transitions = 3;
  s.prior_tasks = 1;
  s.probability = 0.25;
  const ChoiceSupport back = nlohmann::json(s).get<ChoiceSupport>();
  EXPECT_EQ(back.basis, "memory");
  EXPECT_EQ(back.prior_transitions, 3);
  EXPECT_EQ(back.prior_tasks, 1);
  EXPECT_DOUBLE_EQ(back.probability, 0.25);
  EXPECT_EQ(nlohmann::json::object().get<ChoiceSupport>().basis, "explored");
}

}  // namespace
}  // namespace kforge::memory

#include "memory/weighting.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "memory/fake_store_test_util.h"

namespace kforge::memory {
namespace {

using testing::FakeStore;
using testing::kHere;

TEST(EvidenceWeight, MultipliesTheFactorsOfEachDifference) {
  ProvenanceWeights weights;  // 0.5 device, 0.8 toolchain, 0.7 similar, 0.3 other family
  EXPECT_DOUBLE_EQ(evidence_weight(kHere, kHere, weights), 1.0);
  Provenance p = kHere;
  p.compute_capability = "8.0";
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 0.5);
  p.toolchain = "nvcc 12.4";
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 0.4);
  p.family = "softmax";  // similar to rmsnorm by default
  EXPECT_NEAR(evidence_weight(p, kHere, weights), 0.28, 1e-12);
  p.family = "gemv";
  EXPECT_NEAR(evidence_weight(p, kHere, weights), 0.12, 1e-12);
  p = kHere;
  p.backend = "cpu";
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 0.0);
  p = kHere;
  p.task_hash = "another task";  // same family, same machine: full weight
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 1.0);
}

TEST(EvidenceWeight, SimilarFamiliesAndFactorsAreConfigurable) {
  ProvenanceWeights weights;
  weights.similar_families = {{"rmsnorm", "gemv"}};
  weights.similar_family = 0.9;
  Provenance p = kHere;
  p.family = "gemv";
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 0.9);
  p.family = "softmax";
  EXPECT_DOUBLE_EQ(evidence_weight(p, kHere, weights), 0.3);
  weights.other_family = -0.1;
  EXPECT_THROW(weights.validate(), Error);
}

TEST(EvidenceWeight, LogSoftmaxEvidenceCountsAsSimilarToSoftmaxByDefault) {
  // The default groups once named "logsoftmax", so log_softmax evidence weighed as unrelated.
  ProvenanceWeights weights;
  Provenance softmax = kHere;
  softmax.family = "softmax";
  Provenance log_softmax = kHere;
  log_softmax.family = "log_softmax";
  EXPECT_DOUBLE_EQ(evidence_weight(log_softmax, softmax, weights), weights.similar_family);
  Provenance channels = kHere;
  channels.family = "rmsnorm_channels";
  EXPECT_DOUBLE_EQ(evidence_weight(channels, softmax, weights), weights.similar_family);
}

TEST(EvidenceWeight, ASimilarityGroupNamingAnUnknownFamilyIsAnError) {
  const std::vector<std::string> known = {"gemv", "gemv_t", "layernorm", "log_softmax",
                                          "rmsnorm", "rmsnorm_channels", "softmax"};
  ProvenanceWeights weights;
  EXPECT_NO_THROW(weights.validate_families(known));
  weights.similar_families = {{"softmax", "logsoftmax"}};
  try {
    weights.validate_families(known);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown family 'logsoftmax'"), std::string::npos)
        << e.what();
  }
}

TEST(WeightedStats, AccumulateWeightedMeanEmaAndSuccesses) {
  Evidence ok;
  ok.verdict = "ok";
  WeightedStats s;
  ok.log_gain = 0.2;
  s.add(ok, 1.0);
  ok.log_gain = 0.8;
  s.add(ok, 0.5);
  Evidence failed;
  failed.verdict = "wrong_answer";
  s.add(failed, 0.5);
  s.add(ok, 0.0);  // zero weight: ignored
  EXPECT_DOUBLE_EQ(s.attempts, 2.0);
  EXPECT_DOUBLE_EQ(s.gain_weight, 1.5);
  EXPECT_NEAR(s.mean_log_gain, 0.4, 1e-12);   // (0.2 + 0.5 * 0.8) / 1.5
  EXPECT_NEAR(s.ema_log_gain, 0.171, 1e-12);  // 0.06 + 0.3 * 0.5 * (0.8 - 0.06)
  EXPECT_DOUBLE_EQ(s.successes, 1.5);
}

TEST(MemoryView, SplitsEvidenceByNodeStrategyAndLag) {
  FakeStore store;
  for (const char* id : {"a", "b", "c"}) store.add_direction(id, 0.0);
  store.attempt("c", "c_s0", 0.3, {"b", "a"});
  store.attempt("c", "c_s1", std::nullopt, {"a"});
  Provenance cpu = kHere;
  cpu.backend = "cpu";
  store.attempt("c", "c_s0", 5.0, {"b"}, cpu);  // another backend: not loaded
  MemoryView view = MemoryView::load(store, kHere, ProvenanceWeights{});
  EXPECT_DOUBLE_EQ(view.direction_stats("c").attempts, 2.0);
  EXPECT_DOUBLE_EQ(view.strategy_stats("c_s0").mean_log_gain, 0.3);
  EXPECT_DOUBLE_EQ(view.edge_stats("b", "c", 1).attempts, 1.0);
  EXPECT_DOUBLE_EQ(view.edge_stats("a", "c", 2).mean_log_gain, 0.3);
  EXPECT_DOUBLE_EQ(view.edge_stats("a", "c", 1).attempts, 1.0);
  EXPECT_DOUBLE_EQ(view.edge_stats("a", "c", 1).gain_weight, 0.0);
  EXPECT_EQ(view.weighted_evidence().size(), 2u);
}

}  // namespace
}  // namespace kforge::memory

// The optimizer through its generator seam, with a generator shaped like the LLM generator:
// sources written after planning, failures repaired, unwritten proposals, an exhausted
// generator, a given strategy selector, and a first kernel the generator writes itself (a
// PyTorch problem under --generator llm: no native reference to start from).
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generation/templates_generator.h"
#include "search/optimizer.h"
#include "search/optimizer_test_util.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;

using namespace kforge::search::fakes;  // NOLINT: the shared fakes

// A generator with the LLM generator's shape over the toy templates: apply() plans without a
// source, write_sources() writes it (BROKEN when `broken_first`, or fails to write every
// `fail_every`-th one), repair() fixes a BROKEN source (or not, when `repairs_fix` is false),
// and exhausted() reports a stop after `budget_sources` sources.
class ScriptedGenerator : public generation::TemplatesGenerator {
 public:
  using TemplatesGenerator::TemplatesGenerator;
  /// With `first_unwritten`, one hint planned without a source, as the llm generator's first
  /// kernel for a task without a native reference.
  std::vector<generation::Proposal> initial_proposals() override {
    std::vector<generation::Proposal> hints = TemplatesGenerator::initial_proposals();
    if (!first_unwritten) return hints;
    hints.resize(1);
    pending_[hints[0].id] = hints[0].job.source;
    hints[0].job.source.clear();
    return hints;
  }
  std::optional<generation::Proposal> apply(const generation::Proposal& parent,
                                            const memory::Strategy& strategy) override {
    auto proposal = TemplatesGenerator::apply(parent, strategy);
    if (proposal) {
      pending_[proposal->id] = proposal->job.source;
      proposal->job.source.clear();
    }
    return proposal;
  }
  void write_sources(const std::vector<generation::Proposal*>& proposals) override {
    for (generation::Proposal* p : proposals) {
      ++written;
      if (fail_every > 0 && written % fail_every == 0) {
        p->failure = "the model's reply has no C++ code block";
        continue;
      }
      p->job.source = (broken_first ? "BROKEN " : "") + pending_.at(p->id);
    }
  }
  void observe(const generation::Proposal&, const generation::Feedback& feedback) override {
    if (feedback.verdict == Verdict::compile_error) ++compile_errors_seen;
  }
  std::optional<generation::Proposal> repair(const generation::Proposal& failed,
                                             const generation::Feedback& feedback) override {
    ++repairs;
    EXPECT_NE(feedback.build_log.find("BROKEN"), std::string::npos);
    generation::Proposal fixed = failed;
    fixed.id = failed.id + "-r" + std::to_string(repairs);
    if (repairs_fix) {
      fixed.job.source = failed.job.source.substr(7);
    } else if (!repairs_repeat) {
      // Another broken program each time (a comment would not do: duplicates.h).
      fixed.job.source = failed.job.source + " int try" + std::to_string(repairs) + ";";
    }
    return fixed;
  }
  std::string exhausted() const override {
    return budget_sources > 0 && written >= budget_sources ? "LLM budget reached" : "";
  }
  bool first_unwritten = false;
  bool broken_first = false;
  bool repairs_fix = true;
  bool repairs_repeat = false;  // an unfixed repair answers the failed source unchanged
  int fail_every = 0;
  int budget_sources = 0;
  int written = 0;
  int repairs = 0;
  int compile_errors_seen = 0;

 private:
  std::map<std::string, std::string> pending_;
};

// Counts its calls and always takes the last candidate.
class LastSelector : public memory::StrategySelector {
 public:
  memory::StrategyPick select(std::span<const memory::StrategyArm> arms,
                              const memory::StateSummary&, std::mt19937_64&) override {
    ++calls;
    return {arms.size() - 1, "last"};
  }
  int calls = 0;
};

class OptimizerSeamTest : public OptimizerTest {
 protected:
  OptimizeResult run_with(ScriptedGenerator& generator, OptimizeOptions options,
                          memory::StrategySelector* selector = nullptr) {
    report::RunDirectory run_dir(root_ / ("seam" + std::to_string(runs_++)));
    RealPlane plane = make_real_plane(task_, "cpu", options, evaluation::EvaluationPolicy{},
                                      compiler_, {&worker_}, reference_worker_);
    Optimizer optimizer(task_, "cpu", options, *store_, generator, *plane.evaluator, *plane.pool,
                        {&worker_}, reference_worker_, run_dir, [](const std::string&) {},
                        selector);
    return optimizer.run();
  }
  generation::KernelFamily family() {
    return generation::load_family((root_ / "kernels").string(), "cpu", "toy");
  }
};

TEST_F(OptimizerSeamTest, FailedCandidatesGoBackToTheGeneratorAndTheRepairIsEvaluated) {
  ScriptedGenerator generator(family());
  generator.broken_first = true;
  OptimizeOptions options;
  options.steps = 2;
  options.proposals_per_step = 1;
  OptimizeResult result = run_with(generator, options);
  EXPECT_EQ(generator.repairs, 2);  // one per step, each fixing its candidate
  EXPECT_EQ(generator.compile_errors_seen, 2);
  int repaired_ok = 0, broken = 0;
  for (const CandidateRecord& c : result.candidates) {
    if (c.step == 0) continue;
    broken += c.verdict == Verdict::compile_error;
    repaired_ok += c.verdict == Verdict::ok && c.id.find("-r") != std::string::npos;
    EXPECT_FALSE(c.strategy_id.empty()) << c.id;
  }
  EXPECT_EQ(broken, 2);
  EXPECT_EQ(repaired_ok, 2);
  EXPECT_EQ(store_->evidence_count(), 2);  // one piece of evidence per move, after its repairs
}

TEST_F(OptimizerSeamTest, ResultSaysWhereTheWallTimeWent) {
  // result.json's phases_s (issue 18: what a suite spends outside evaluation): disjoint phases
  // that sum to the run's wall time, the reference's preparation and the final rung among them.
  ScriptedGenerator generator(family());
  OptimizeOptions options;
  options.steps = 1;
  options.proposals_per_step = 1;
  OptimizeResult result = run_with(generator, options);
  ASSERT_TRUE(result.best.has_value());
  double sum = 0.0;
  for (const auto& [phase, seconds] : result.phases_s) {
    EXPECT_GE(seconds, 0.0) << phase;
    sum += seconds;
  }
  EXPECT_GT(result.phases_s.count("prepare"), 0u);
  EXPECT_GT(result.phases_s.count("final"), 0u);
  EXPECT_GT(result.phases_s.count("search"), 0u);
  EXPECT_NEAR(sum, result.wall_s, 0.05 + 0.02 * result.wall_s);
  EXPECT_TRUE(result.to_json().at("phases_s").is_object());
}

TEST_F(OptimizerSeamTest, RepairTriesAreBounded) {
  ScriptedGenerator generator(family());
  generator.broken_first = true;
  generator.repairs_fix = false;
  OptimizeOptions options;
  options.steps = 1;
  options.proposals_per_step = 1;
  options.repair_tries = 3;
  OptimizeResult result = run_with(generator, options);
  EXPECT_EQ(generator.repairs, 3);
  EXPECT_EQ(result.candidates.size(), 3u + 1u + 3u);  // 3 hints, the candidate, 3 repairs
}

TEST_F(OptimizerSeamTest, ARepairThatAnswersTheSameKernelIsADuplicateAndEndsTheRepairs) {
  ScriptedGenerator generator(family());
  generator.broken_first = true;
  generator.repairs_fix = false;
  generator.repairs_repeat = true;
  OptimizeOptions options;
  options.steps = 1;
  options.proposals_per_step = 1;
  options.repair_tries = 3;
  OptimizeResult result = run_with(generator, options);
  // The same failure would get the same answer again: one repair, recorded as the failed
  // candidate's duplicate, and no more; the move's evidence is the failed try's.
  EXPECT_EQ(generator.repairs, 1);
  ASSERT_EQ(result.candidates.size(), 3u + 1u + 1u);
  const CandidateRecord& failed = result.candidates[3];
  const CandidateRecord& repair = result.candidates[4];
  EXPECT_EQ(repair.duplicate_of, failed.id);
  EXPECT_EQ(repair.verdict, Verdict::compile_error);
  EXPECT_EQ(repair.device_s, 0.0);
  ASSERT_EQ(store_->evidence_count(), 1);
  EXPECT_EQ(store_->evidence("cpu").at(0).verdict, "compile_error");
}

TEST_F(OptimizerSeamTest, AFirstKernelTheGeneratorWritesIsRepairedAndLeavesNoEvidence) {
  ScriptedGenerator generator(family());
  generator.first_unwritten = true;
  generator.broken_first = true;  // every source it writes, the first kernel's included
  OptimizeOptions options;
  options.steps = 1;
  options.proposals_per_step = 1;
  OptimizeResult result = run_with(generator, options);
  ASSERT_GE(result.candidates.size(), 4u);
  const CandidateRecord& first = result.candidates[0];
  EXPECT_EQ(first.step, 0);
  EXPECT_EQ(first.verdict, Verdict::compile_error);
  const CandidateRecord& repaired = result.candidates[1];
  EXPECT_EQ(repaired.id, first.id + "-r1");
  EXPECT_EQ(repaired.step, 0);
  EXPECT_EQ(repaired.verdict, Verdict::ok);
  EXPECT_TRUE(repaired.strategy_id.empty());
  EXPECT_EQ(result.candidates[2].parent_id, repaired.id);  // step 1 refines the repaired kernel
  EXPECT_EQ(generator.repairs, 2);                          // the first kernel's and step 1's
  EXPECT_EQ(store_->evidence_count(), 1);                   // step 1's move only
  ASSERT_TRUE(result.best);
}

TEST_F(OptimizerSeamTest, AFirstKernelThatIsNeverCorrectEndsTheRunWithoutABest) {
  ScriptedGenerator generator(family());
  generator.first_unwritten = true;
  generator.broken_first = true;
  generator.repairs_fix = false;
  OptimizeOptions options;
  options.repair_tries = 2;
  OptimizeResult result = run_with(generator, options);
  EXPECT_FALSE(result.best);
  EXPECT_EQ(result.candidates.size(), 3u);  // the first kernel and its two repairs
  EXPECT_EQ(result.stopped_by, StopReason::no_correct);
  EXPECT_NE(result.stopped_early.find("no first kernel the generator wrote passed the gate"),
            std::string::npos)
      << result.stopped_early;
  EXPECT_EQ(store_->evidence_count(), 0);
}

TEST_F(OptimizerSeamTest, AFirstKernelTheGeneratorCannotWriteIsAGenerationFailure) {
  ScriptedGenerator generator(family());
  generator.first_unwritten = true;
  generator.fail_every = 1;
  OptimizeResult result = run_with(generator, OptimizeOptions{});
  EXPECT_FALSE(result.best);
  EXPECT_TRUE(result.candidates.empty());
  EXPECT_EQ(result.generation_failures, 1);
  EXPECT_EQ(result.stopped_by, StopReason::no_correct);
}

TEST_F(OptimizerSeamTest, UnwrittenProposalsAreCountedAndTheRunGoesOn) {
  ScriptedGenerator generator(family());
  generator.fail_every = 2;
  OptimizeOptions options;
  options.steps = 3;
  options.proposals_per_step = 2;
  OptimizeResult result = run_with(generator, options);
  EXPECT_EQ(result.generation_failures, 3);
  EXPECT_TRUE(result.best);
  for (const CandidateRecord& c : result.candidates) EXPECT_NE(c.verdict, Verdict::compile_error);
  EXPECT_EQ(result.to_json()["generation_failures"], 3);
}

TEST_F(OptimizerSeamTest, AnExhaustedGeneratorStopsTheSearchButTheRunFinishes) {
  ScriptedGenerator generator(family());
  generator.budget_sources = 2;
  OptimizeOptions options;
  options.steps = 6;
  options.proposals_per_step = 1;
  OptimizeResult result = run_with(generator, options);
  EXPECT_EQ(generator.written, 2);
  EXPECT_EQ(result.stopped_early, "LLM budget reached");
  ASSERT_TRUE(result.best);
  EXPECT_TRUE(fs::exists(result.best_source_path));
}

TEST_F(OptimizerSeamTest, TheGivenSelectorChoosesStrategies) {
  ScriptedGenerator generator(family());
  LastSelector selector;
  OptimizeOptions options;
  options.steps = 2;
  run_with(generator, options, &selector);
  EXPECT_GT(selector.calls, 0);
}

}  // namespace
}  // namespace kforge::search

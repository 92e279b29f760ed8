// Identical candidates are evaluated once, and the best's lineage says what the memory
// contributed (issue 21), through the optimizer with the shared fakes.
#include <atomic>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "report/run_database.h"
#include "search/optimizer_test_util.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;
using namespace kforge::search::fakes;  // NOLINT: the shared fakes

// A model that always answers the kernel it was asked to change, as the stand-in endpoint of
// the issue did: every applied strategy gives the parent's program again under a new id, for
// half the strategies with a comment and blank lines added. With `new_define`, each answer
// carries a define of its own instead (another program: not a duplicate).
class EchoGenerator : public generation::TemplatesGenerator {
 public:
  using TemplatesGenerator::TemplatesGenerator;
  std::optional<generation::Proposal> apply(const generation::Proposal& parent,
                                            const memory::Strategy& strategy) override {
    generation::Proposal echo = parent;
    echo.id = parent.id + "~" + strategy.id;  // the same on a resumed run's replay
    echo.parent_id = parent.id;
    echo.change = strategy.id + ": the same kernel again";
    if (strategy.id.size() % 2 == 1) {
      echo.job.source = "// " + strategy.id + ": the kernel, unchanged\n\n" + parent.job.source +
                        "   \n";
    }
    if (new_define) echo.job.defines["KF_ECHO_" + strategy.id] = "1";
    return echo;
  }
  bool new_define = false;
};

class OptimizerDuplicatesTest : public OptimizerTest {
 protected:
  OptimizeResult run_echo(const fs::path& dir, OptimizeOptions options, FakeWorker& worker,
                          bool new_define = false,
                          const std::function<void(Optimizer&)>& setup = {}) {
    EchoGenerator generator(generation::load_family((root_ / "kernels").string(), "cpu", "toy"));
    generator.new_define = new_define;
    report::RunDirectory run_dir(dir, options.resume ? report::RunDirectory::Mode::resume
                                                     : report::RunDirectory::Mode::create);
    RealPlane plane = make_real_plane(task_, "cpu", options, evaluation::EvaluationPolicy{},
                                      compiler_, {&worker}, reference_worker_);
    Optimizer optimizer(task_, "cpu", options, *store_, generator, *plane.evaluator, *plane.pool,
                        {&worker}, reference_worker_, run_dir, [&](const std::string& line) {
                          if (on_line_) on_line_(line);
                        });
    if (setup) setup(optimizer);
    return optimizer.run();
  }
  static OptimizeOptions echo_options(int steps) {
    OptimizeOptions options;
    options.steps = steps;
    options.proposals_per_step = 3;
    return options;
  }
  const CandidateRecord& by_id(const OptimizeResult& result, const std::string& id) {
    for (const CandidateRecord& c : result.candidates) {
      if (c.id == id) return c;
    }
    throw Error("no candidate " + id);
  }
};

TEST_F(OptimizerDuplicatesTest, TheSameKernelAgainIsMarkedWithItsOriginalsResultAndNotEvaluated) {
  FakeWorker one_step;
  const OptimizeResult first = run_echo(root_ / "one", echo_options(1), one_step);
  fresh_store();
  FakeWorker three_steps;
  const OptimizeResult result = run_echo(root_ / "three", echo_options(3), three_steps);

  int duplicates = 0;
  for (const CandidateRecord& c : result.candidates) {
    if (c.step == 0) {
      EXPECT_EQ(c.duplicate_of, "") << c.id;
      continue;
    }
    ++duplicates;
    // Every answer repeats its parent (some with a comment and blank lines added).
    ASSERT_EQ(c.duplicate_of, c.parent_id) << c.id;
    const CandidateRecord& original = by_id(result, c.duplicate_of);
    EXPECT_EQ(c.duplicate_of_index, original.index);
    EXPECT_EQ(c.verdict, original.verdict);
    EXPECT_EQ(c.median_ms, original.median_ms);
    EXPECT_EQ(c.device_s, 0.0);
    EXPECT_NE(c.acceptance, std::optional<ComparisonOutcome>(ComparisonOutcome::faster));
    const nlohmann::json row = result.to_json()["candidates"][static_cast<size_t>(c.index)];
    EXPECT_EQ(row["duplicate_of"], original.id);
  }
  EXPECT_GE(duplicates, 6);
  // Two more steps of answers cost no worker call: the same gate, timing and final rung work
  // as the one-step run's.
  EXPECT_EQ(three_steps.runs, one_step.runs);
  EXPECT_EQ(three_steps.times, one_step.times);
  EXPECT_EQ(result.best->id, first.best->id);
  // Duplicates reached no rung of their own, never became the best and taught the memory
  // nothing (the hints are no moves, so the store has no evidence at all).
  int occupancy = 0;
  for (int n : result.rung_occupancy) occupancy += n;
  EXPECT_EQ(occupancy, static_cast<int>(result.candidates.size()) - duplicates);
  for (const nlohmann::json& e : events_of(root_ / "three", "new_best")) {
    EXPECT_EQ(by_id(result, e["id"]).duplicate_of, "");
  }
  EXPECT_EQ(events_of(root_ / "three", "candidate").back()["duplicate_of"],
            result.candidates.back().duplicate_of);
  EXPECT_EQ(store_->evidence_count(), 0);
}

TEST_F(OptimizerDuplicatesTest, AnotherDefineIsAnotherProgram) {
  const OptimizeResult result = run_echo(root_ / "defines", echo_options(1), worker_, true);
  int moves = 0;
  for (const CandidateRecord& c : result.candidates) {
    EXPECT_EQ(c.duplicate_of, "") << c.id;
    if (c.step == 0) continue;
    ++moves;
    EXPECT_GT(c.device_s, 0.0) << c.id;
  }
  EXPECT_EQ(moves, 3);
}

TEST_F(OptimizerDuplicatesTest, ResumeKeepsTheMarking) {
  std::atomic<int> interrupts{0};
  on_line_ = [&](const std::string& line) {
    if (line.find("same as #") != std::string::npos) interrupts = 1;
  };
  const fs::path dir = root_ / "interrupted";
  const OptimizeResult stopped = run_echo(dir, echo_options(2), worker_, false,
                                          [&](Optimizer& o) { o.set_interrupts(&interrupts); });
  on_line_ = nullptr;
  ASSERT_TRUE(stopped.interrupted);
  ASSERT_EQ(stopped.candidates.back().duplicate_of, stopped.candidates.back().parent_id);

  OptimizeOptions resume = echo_options(2);
  resume.resume = true;
  FakeWorker resumed_worker;
  const OptimizeResult resumed = run_echo(dir, resume, resumed_worker);
  EXPECT_FALSE(resumed.interrupted);
  ASSERT_GT(resumed.candidates.size(), stopped.candidates.size());
  for (size_t i = 0; i < stopped.candidates.size(); ++i) {
    const CandidateRecord& was = stopped.candidates[i];
    const CandidateRecord& now = resumed.candidates[i];
    EXPECT_EQ(now.id, was.id);
    EXPECT_TRUE(now.replayed);
    EXPECT_EQ(now.duplicate_of, was.duplicate_of) << now.id;
    EXPECT_EQ(now.duplicate_of_index, was.duplicate_of_index) << now.id;
    EXPECT_EQ(now.median_ms, was.median_ms) << now.id;
    if (!now.duplicate_of.empty()) EXPECT_EQ(now.device_s, 0.0) << now.id;
  }
  for (size_t i = stopped.candidates.size(); i < resumed.candidates.size(); ++i) {
    EXPECT_EQ(resumed.candidates[i].duplicate_of, resumed.candidates[i].parent_id);
  }
  EXPECT_EQ(report::RunDatabase::open(dir / "run.sqlite")->meta("status"), "finished");
}

// The lineage of the best, from a fresh memory and from one that an earlier run filled: the
// first run's moves can only be explored or supported by its own evidence; the second's name
// the earlier run's transitions.
TEST_F(OptimizerDuplicatesTest, LineageSaysWhichMovesCameFromEarlierRunsEvidence) {
  OptimizeOptions options;
  options.steps = 3;
  options.proposals_per_step = 2;
  const OptimizeResult fresh = run(options);
  ASSERT_TRUE(fresh.best);
  ASSERT_GE(fresh.lineage.size(), 2u) << "the toy family's best is a refined kernel";
  EXPECT_EQ(fresh.lineage.front().strategy_id, "");  // the expert hint it descends from
  EXPECT_FALSE(fresh.lineage.front().support);
  EXPECT_EQ(fresh.lineage.back().id, fresh.best->id);
  for (size_t i = 1; i < fresh.lineage.size(); ++i) {
    const LineageStep& step = fresh.lineage[i];
    EXPECT_EQ(step.parent_id, fresh.lineage[i - 1].id);
    ASSERT_TRUE(step.support) << step.id;
    EXPECT_NE(step.support->basis, "memory") << step.id;
    EXPECT_EQ(step.support->prior_transitions + step.support->prior_direction +
                  step.support->prior_strategy + step.support->prior_against,
              0);
  }
  const nlohmann::json json = fresh.to_json();
  EXPECT_EQ(json["best"]["lineage"].size(), fresh.lineage.size());
  EXPECT_EQ(json["best"]["lineage"].back()["id"], fresh.best->id);

  // The same task again, over the memory the first run wrote.
  const OptimizeResult seeded = run(options);
  ASSERT_TRUE(seeded.best);
  int from_memory = 0;
  for (const LineageStep& step : seeded.lineage) {
    if (!step.support || step.support->basis != "memory") continue;
    ++from_memory;
    EXPECT_GT(step.support->prior_transitions + step.support->prior_direction +
                  step.support->prior_strategy,
              0);
    EXPECT_EQ(step.support->prior_tasks, 1);  // the one earlier run, of this task
  }
  EXPECT_GT(from_memory, 0);
  const nlohmann::json lineage = seeded.to_json()["best"]["lineage"];
  EXPECT_EQ(lineage.back()["support"]["basis"].is_string(), true);
}

}  // namespace
}  // namespace kforge::search

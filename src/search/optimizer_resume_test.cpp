// Runs a user can trust and resume: crash and resume at many points, budget stops, Ctrl-C,
// and --resume's refusals at the optimizer's level (issue 5).
#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>

#include "report/run_database.h"
#include "search/optimizer_test_util.h"
#include "task/task_loader.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;
using namespace kforge::search::fakes;  // NOLINT: the shared fakes

/// What must come out the same from an uninterrupted run and an interrupted-then-resumed one.
struct RunOutcome {
  std::vector<std::string> candidates;  // "id verdict median"
  std::string best;
  std::vector<nlohmann::json> decisions;
  std::vector<std::string> evidence;    // "direction/strategy <- prefix" in store order
};

class OptimizerResumeTest : public OptimizerTest {
 protected:
  RunOutcome outcome(const OptimizeResult& result, const fs::path& dir) {
    RunOutcome o;
    for (const CandidateRecord& c : result.candidates) {
      o.candidates.push_back(c.id + " " + to_string(c.verdict) + " " +
                             (c.median_ms ? std::to_string(*c.median_ms) : "-"));
    }
    o.best = result.best ? result.best->id : "";
    o.decisions = report::RunDatabase::open(dir / "run.sqlite")->decisions();
    for (const memory::Evidence& e : store_->evidence("cpu")) {
      std::string prefix;
      for (const std::string& p : e.prefix) prefix += p + ",";
      o.evidence.push_back(e.direction_id + "/" + e.strategy_id + " <- " + prefix);
    }
    return o;
  }
  static OptimizeOptions small() {
    OptimizeOptions options;
    options.steps = 3;
    options.proposals_per_step = 2;
    options.seed = 7;
    return options;
  }
};

TEST_F(OptimizerResumeTest, ResumeAfterACrashAtManyPointsEqualsTheUninterruptedRun) {
  FakeWorker reference_run;
  const OptimizeResult baseline = run_in(root_ / "baseline", small(), reference_run);
  const RunOutcome expected = outcome(baseline, root_ / "baseline");
  const int total_times = reference_run.times;
  ASSERT_GT(total_times, 10);
  ASSERT_FALSE(expected.evidence.empty());
  // Crashes in the hints, the steps, acceptance comparisons, rung 2 and the final rung.
  for (int k = 1; k < total_times; k += std::max(1, total_times / 9)) {
    SCOPED_TRACE("crash at time() call " + std::to_string(k));
    fresh_store();
    const fs::path dir = root_ / ("crash" + std::to_string(k));
    FakeWorker crashing;
    crashing.crash_at_time = k;
    EXPECT_THROW(run_in(dir, small(), crashing), Error);
    FakeWorker resumed_worker;  // a new process: no handle of the first one survives
    OptimizeOptions resume = small();
    resume.resume = true;
    const OptimizeResult resumed = run_in(dir, resume, resumed_worker);
    const RunOutcome got = outcome(resumed, dir);
    EXPECT_EQ(got.candidates, expected.candidates);
    EXPECT_EQ(got.best, expected.best);
    EXPECT_EQ(got.decisions, expected.decisions);
    EXPECT_EQ(got.evidence, expected.evidence);  // nothing written twice, nothing lost
    if (k > 1) EXPECT_GT(resumed.replayed_candidates, 0);  // call 1 times the first hint
    // The replay re-timed nothing it had recorded: together the two sessions timed about what
    // the uninterrupted run did (plus the reference and the final rung again, and the one in
    // flight).
    EXPECT_LE(crashing.times + resumed_worker.times, total_times + 20);
    EXPECT_GT(resumed.speedup.speedup, 1.0);
  }
}

TEST_F(OptimizerResumeTest, ResumeAfterACrashInAnyRung2ReplaysThePromotions) {
  FakeWorker reference_run;
  const OptimizeResult baseline = run_in(root_ / "baseline", small(), reference_run);
  const RunOutcome expected = outcome(baseline, root_ / "baseline");
  ASSERT_GE(reference_run.full_times, 3);  // the hints' and at least two steps' promotions
  for (int k = 1; k <= reference_run.full_times; ++k) {
    SCOPED_TRACE("crash at rung-2 time() call " + std::to_string(k));
    fresh_store();
    const fs::path dir = root_ / ("crash" + std::to_string(k));
    FakeWorker crashing;
    crashing.crash_at_full_time = k;
    EXPECT_THROW(run_in(dir, small(), crashing), Error);
    const std::vector<nlohmann::json> recorded =
        report::RunDatabase::open(dir / "run.sqlite")->decisions();
    const auto promotions_before =
        std::count_if(recorded.begin(), recorded.end(),
                      [](const nlohmann::json& d) { return d["kind"] == "promotion"; });
    EXPECT_GT(promotions_before, 0);  // decided before rung 2 ran
    FakeWorker resumed_worker;
    OptimizeOptions resume = small();
    resume.resume = true;
    resume.explain = true;
    std::vector<std::string> lines;
    const OptimizeResult resumed = run_in(dir, resume, resumed_worker, &lines);
    const RunOutcome got = outcome(resumed, dir);
    EXPECT_EQ(got.candidates, expected.candidates);
    EXPECT_EQ(got.best, expected.best);
    EXPECT_EQ(got.decisions, expected.decisions);
    EXPECT_EQ(got.evidence, expected.evidence);
    // Rung 2 is not measured again for a candidate that finished it: together the sessions ran
    // it once per promoted candidate, plus the rounds of the one in flight (one timed workload
    // here, in full_rounds rounds).
    const int in_flight_rounds = evaluation::EvaluationPolicy{}.full_rounds;
    EXPECT_LE(crashing.full_times + resumed_worker.full_times,
              reference_run.full_times + in_flight_rounds);
    int explained = 0;
    for (const std::string& line : lines) explained += line.find(" promoted: ") != std::string::npos;
    EXPECT_GT(explained, 0);  // --explain prints the replayed promotions too
  }
}

TEST_F(OptimizerResumeTest, AWorkerPoolFinishingOutOfOrderGivesTheSingleWorkerRun) {
  FakeWorker single;
  const OptimizeResult baseline = run_in(root_ / "single", small(), single);
  const RunOutcome expected = outcome(baseline, root_ / "single");
  // Three workers of different speeds: the first job started is the last to finish.
  fresh_store();
  FakeWorker slow, medium, fast;
  slow.delay_ms = 6;
  medium.delay_ms = 2;
  std::vector<std::string> lines;
  const OptimizeResult pooled =
      run_pool(root_ / "pool", small(), {&slow, &medium, &fast}, &lines);
  const RunOutcome got = outcome(pooled, root_ / "pool");
  EXPECT_EQ(got.candidates, expected.candidates);
  EXPECT_EQ(got.best, expected.best);
  EXPECT_EQ(got.decisions, expected.decisions);
  EXPECT_EQ(got.evidence, expected.evidence);
  // Batches of two or three: at least two workers timed candidates.
  EXPECT_GE((slow.times > 0) + (medium.times > 0) + (fast.times > 0), 2);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "worker pool: 3 candidate workers, one candidate each at a time"),
            lines.end());
  // Each timing request went to one worker: together they timed what the single worker did,
  // plus the incumbents loaded and compared on a challenger's worker (no extra timing).
  EXPECT_EQ(slow.times + medium.times + fast.times, single.times);
}

TEST_F(OptimizerResumeTest, APooledRunResumesAfterACrashOnOneWorker) {
  FakeWorker single;
  const OptimizeResult baseline = run_in(root_ / "single", small(), single);
  const RunOutcome expected = outcome(baseline, root_ / "single");
  for (int k : {1, 2, 3}) {
    SCOPED_TRACE("crash at worker b's time() call " + std::to_string(k));
    fresh_store();
    const fs::path dir = root_ / ("crash" + std::to_string(k));
    FakeWorker a, b;
    b.crash_at_time = k;
    EXPECT_THROW(run_pool(dir, small(), {&a, &b}), Error);
    FakeWorker c, d;
    OptimizeOptions resume = small();
    resume.resume = true;
    const OptimizeResult resumed = run_pool(dir, resume, {&c, &d});
    const RunOutcome got = outcome(resumed, dir);
    EXPECT_EQ(got.candidates, expected.candidates);
    EXPECT_EQ(got.best, expected.best);
    EXPECT_EQ(got.decisions, expected.decisions);
    EXPECT_EQ(got.evidence, expected.evidence);
  }
}

TEST_F(OptimizerResumeTest, SameSeedSameDecisionsInTheRunDatabase) {
  FakeWorker first_worker;
  const RunOutcome first = outcome(run_in(root_ / "a", small(), first_worker), root_ / "a");
  fresh_store();
  FakeWorker second_worker;
  const RunOutcome second = outcome(run_in(root_ / "b", small(), second_worker), root_ / "b");
  EXPECT_EQ(first.decisions, second.decisions);
  EXPECT_EQ(first.candidates, second.candidates);
  bool plan = false, outcome_seen = false, full = false, promoted = false, pruned = false;
  for (const nlohmann::json& d : first.decisions) {
    plan |= d["kind"] == "plan";
    outcome_seen |= d["kind"] == "outcome";
    full |= d["kind"] == "full_choice";
    promoted |= d["kind"] == "promotion" && d["outcome"] == "promoted";
    pruned |= d["kind"] == "promotion" && d["outcome"] == "pruned";
  }
  EXPECT_TRUE(plan && outcome_seen && full && promoted && pruned);
}

TEST_F(OptimizerResumeTest, RunDatabaseRecordsMetaCandidatesRungsAndDecisions) {
  FakeWorker worker;
  const OptimizeResult result = run_in(root_ / "run", small(), worker);
  auto db = report::RunDatabase::open(root_ / "run" / "run.sqlite");
  EXPECT_EQ(db->meta("seed"), 7);
  EXPECT_EQ(db->meta("task_hash"), task_hash(task_));
  EXPECT_EQ(db->meta("status"), "finished");
  EXPECT_EQ(db->meta("options")->at("steps"), 3);
  ASSERT_EQ(db->candidates().size(), result.candidates.size());
  EXPECT_TRUE(db->candidates()[0].evaluation.contains("rungs"));
  std::vector<std::string> rungs;
  for (const report::RungRow& r : db->rungs(result.best->id)) rungs.push_back(r.rung);
  EXPECT_NE(std::find(rungs.begin(), rungs.end(), "quick"), rungs.end());
  EXPECT_NE(std::find(rungs.begin(), rungs.end(), "full"), rungs.end());
  EXPECT_EQ(rungs.back(), "final");
}

TEST_F(OptimizerResumeTest, ExplainPrintsWhyCandidatesArePromotedPrunedOrRejected) {
  OptimizeOptions options = small();
  options.explain = true;
  std::vector<std::string> lines;
  FakeWorker worker;
  run_in(root_ / "run", options, worker, &lines);
  int promoted = 0, rejected = 0, pruned = 0;
  for (const std::string& line : lines) {
    promoted += line.find("promoted: ") != std::string::npos;
    rejected += line.find("rejected: wrong_answer") != std::string::npos;
    pruned += line.find("pruned: ") != std::string::npos;
  }
  EXPECT_GT(promoted, 0);
  EXPECT_GT(rejected, 0);  // the tiled hint computes zeros
  EXPECT_GT(pruned, 0);
}

TEST_F(OptimizerResumeTest, EachBudgetLimitStopsTheSearchAndTheFinalRungStillRuns) {
  struct Case {
    const char* name;
    std::function<void(OptimizeOptions&)> limit;
    StopReason expected;
  };
  const std::vector<Case> cases = {
      {"candidates", [](OptimizeOptions& o) { o.budget.max_candidates = 4; },
       StopReason::max_candidates},
      {"device", [](OptimizeOptions& o) { o.budget.max_device_s = 1e-9; },
       StopReason::max_device_s},
      {"wall", [](OptimizeOptions& o) { o.budget.max_wall_s = 20.0; }, StopReason::max_wall_s},
      {"cost", [](OptimizeOptions& o) { o.budget.max_cost_usd = 0.5; }, StopReason::max_cost_usd},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fresh_store();
    OptimizeOptions options = small();
    c.limit(options);
    double fake_now = 0.0;  // each reading of the clock: one more second
    double spent_usd = 0.0;  // each reading of the meter: ten more cents
    FakeWorker worker;
    const OptimizeResult result =
        run_in(root_ / c.name, options, worker, nullptr, [&](Optimizer& optimizer) {
          optimizer.set_clock([&] { return fake_now += 1.0; });
          optimizer.set_cost_meter([&] { return spent_usd += 0.1; });
        });
    EXPECT_EQ(result.stopped_by, c.expected) << to_string(result.stopped_by);
    ASSERT_TRUE(result.best);
    EXPECT_GT(result.best_final.median_ms, 0.0);  // the final rung ran on the best so far
    const nlohmann::json json = result.to_json();
    EXPECT_EQ(json["budget"]["stopped_by"], to_string(c.expected));
    EXPECT_TRUE(json["budget"]["spent"].contains("device_s"));
    if (c.expected == StopReason::max_candidates) {
      EXPECT_EQ(result.candidates.size(), 4u);
      EXPECT_EQ(json["budget"]["spent"]["candidates"], 4);
    }
    if (c.expected == StopReason::max_device_s) EXPECT_EQ(result.candidates.size(), 1u);
  }
  fresh_store();
  FakeWorker worker;
  EXPECT_EQ(run_in(root_ / "steps", small(), worker).stopped_by, StopReason::steps);
}

TEST_F(OptimizerResumeTest, ZeroOrNegativeLimitsAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::function<void(BudgetLimits&)>, std::string>> cases = {
      {[](BudgetLimits& b) { b.max_wall_s = 0.0; }, "--max-wall-s"},
      {[](BudgetLimits& b) { b.max_device_s = -1.0; }, "--max-device-s"},
      {[](BudgetLimits& b) { b.max_candidates = 0; }, "--max-candidates"},
      {[](BudgetLimits& b) { b.max_cost_usd = -0.5; }, "--max-cost-usd"},
  };
  for (const auto& [set, flag] : cases) {
    BudgetLimits limits;
    set(limits);
    try {
      limits.validate();
      ADD_FAILURE() << flag << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  }
  BudgetLimits fine;
  fine.max_wall_s = 1.0;
  EXPECT_NO_THROW(fine.validate());
}

TEST_F(OptimizerResumeTest, CtrlCStopsAtACandidateBoundaryAndResumeFinishesTheRun) {
  FakeWorker baseline_worker;
  const RunOutcome expected =
      outcome(run_in(root_ / "baseline", small(), baseline_worker), root_ / "baseline");
  fresh_store();
  std::atomic<int> interrupts{0};
  std::vector<std::string> lines;
  FakeWorker worker;
  const fs::path dir = root_ / "interrupted";
  // Ctrl-C while the fifth candidate is evaluated (its line is printed after it is evaluated).
  on_line_ = [&](const std::string& line) {
    if (line.find("[004]") != std::string::npos) interrupts = 1;
  };
  OptimizeResult stopped = run_in(dir, small(), worker, &lines, [&](Optimizer& optimizer) {
    optimizer.set_interrupts(&interrupts);
  });
  on_line_ = nullptr;
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.stopped_by, StopReason::interrupted);
  EXPECT_EQ(stopped.candidates.size(), 5u);
  EXPECT_FALSE(stopped.final_skipped);
  EXPECT_GT(stopped.best_final.median_ms, 0.0);
  EXPECT_EQ(report::RunDatabase::open(dir / "run.sqlite")->meta("status"), "interrupted");

  OptimizeOptions resume = small();
  resume.resume = true;
  FakeWorker resumed_worker;
  const OptimizeResult resumed = run_in(dir, resume, resumed_worker);
  EXPECT_FALSE(resumed.interrupted);
  const RunOutcome got = outcome(resumed, dir);
  EXPECT_EQ(got.candidates, expected.candidates);
  EXPECT_EQ(got.best, expected.best);
  EXPECT_EQ(got.evidence, expected.evidence);
  EXPECT_EQ(report::RunDatabase::open(dir / "run.sqlite")->meta("status"), "finished");
}

TEST_F(OptimizerResumeTest, ASecondCtrlCSkipsTheFinalRung) {
  std::atomic<int> interrupts{0};
  on_line_ = [&](const std::string& line) {
    if (line.find("[003]") != std::string::npos) interrupts = 2;  // pressed twice, quickly
  };
  FakeWorker worker;
  const OptimizeResult result = run_in(root_ / "run", small(), worker, nullptr,
                                       [&](Optimizer& o) { o.set_interrupts(&interrupts); });
  on_line_ = nullptr;
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.candidates.size(), 4u);
  EXPECT_EQ(report::RunDatabase::open(root_ / "run" / "run.sqlite")->meta("status"),
            "interrupted");
  EXPECT_TRUE(result.interrupted);
  EXPECT_TRUE(result.final_skipped);
  EXPECT_TRUE(result.to_json()["final"].is_null());
}

TEST_F(OptimizerResumeTest, ResumeRefusesAnotherTaskOrOtherOptionsAndWritesNothing) {
  FakeWorker worker;
  worker.crash_at_time = 6;
  EXPECT_THROW(run_in(root_ / "run", small(), worker), Error);
  const auto rows_before = report::RunDatabase::open(root_ / "run" / "run.sqlite")->candidates();
  OptimizeOptions resume = small();
  resume.resume = true;
  std::ofstream(root_ / "reference.cpp") << "another reference\n";  // another task
  FakeWorker second;
  try {
    run_in(root_ / "run", resume, second);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task hash"), std::string::npos) << e.what();
  }
  std::ofstream(root_ / "reference.cpp") << "reference\n";
  resume.seed = 8;
  try {
    run_in(root_ / "run", resume, second);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"seed\":7"), std::string::npos) << e.what();
  }
  auto db = report::RunDatabase::open(root_ / "run" / "run.sqlite");
  EXPECT_EQ(db->candidates().size(), rows_before.size());
  EXPECT_EQ(second.times, 0);
}

}  // namespace
}  // namespace kforge::search

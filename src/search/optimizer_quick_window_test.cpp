// Rung 1 is not decided by load (issue 21): each candidate's quick speedup is over the
// reference timed in rounds interleaved with its quick rounds, not over the reference timed once
// at the start of the run. The fake reference worker is "loaded" (2x slower) while the run times
// it at the start and quiet afterwards, so a start-of-run reference would make every candidate
// twice as fast as it is, and the reference's own code a 2x win over itself.
#include <gtest/gtest.h>

#include <fstream>

#include "report/run_database.h"
#include "search/optimizer_test_util.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;
using namespace kforge::search::fakes;  // NOLINT: the shared fakes

class OptimizerQuickWindowTest : public OptimizerTest {
 protected:
  void SetUp() override {
    OptimizerTest::SetUp();
    // A hint whose kernel is the reference's own code: the fake worker times any artifact from
    // a file named reference* as the reference (20 ms).
    fs::path family = root_ / "kernels" / "cpu" / "toy";
    std::ofstream(family / "reference_copy.cpp") << "reference\n";
    std::ofstream(family / "family.toml", std::ios::app) << R"(
[[variants]]
name = "copy"
source = "reference_copy.cpp"
decomposition = "row_copy"
)";
    reference_worker_.loaded_times = {1};  // the start-of-run timing: 40 ms instead of 20
  }

  static OptimizeOptions one_step() {
    OptimizeOptions options;
    options.steps = 1;
    return options;
  }
};

TEST_F(OptimizerQuickWindowTest, EveryQuickSpeedupIsOverTheReferenceTimedAroundIt) {
  std::vector<std::string> lines;
  const OptimizeResult result = run(one_step(), &lines);
  int timed = 0;
  for (const CandidateRecord& c : result.candidates) {
    if (!c.median_ms || !c.duplicate_of.empty()) continue;
    ++timed;
    ASSERT_TRUE(c.quick_reference) << c.id;
    EXPECT_NEAR(c.quick_reference->median_ms, 20.0, 0.1) << c.id;  // not the start's 40 ms
    // R C R C R C R: a reference round before each quick round and one after the last.
    const evaluation::EvaluationPolicy policy;
    EXPECT_EQ(c.quick_reference->candidate_rounds, policy.quick_rounds);
    ASSERT_EQ(c.quick_reference->rounds_ms.size(), static_cast<size_t>(policy.quick_rounds + 1));
    for (const std::vector<double>& round : c.quick_reference->rounds_ms) {
      EXPECT_EQ(round.size(), static_cast<size_t>(policy.quick_reference.min_repetitions));
    }
    EXPECT_NEAR(c.quick_reference->speedup.speedup, 20.0 / *c.median_ms, 0.02 * 20.0 / *c.median_ms);
    // S(p, 1) is a lower bound of that speedup, not of 40 / median.
    EXPECT_GT(c.quick_score, 0.0) << c.id;
    EXPECT_LE(c.quick_score, 20.05 / *c.median_ms) << c.id;
  }
  EXPECT_GE(timed, 3);
  // The progress line reads the start-of-run reference as it was measured.
  EXPECT_NE(std::find_if(lines.begin(), lines.end(),
                         [](const std::string& l) {
                           return l.find("reference on 'big': 40.0") != std::string::npos;
                         }),
            lines.end());
}

TEST_F(OptimizerQuickWindowTest, TheReferencesOwnCodeIsATieAtRungOne) {
  const OptimizeResult result = run(one_step());
  const auto copy = std::find_if(result.candidates.begin(), result.candidates.end(),
                                 [](const CandidateRecord& c) { return c.id.rfind("copy", 0) == 0; });
  ASSERT_NE(copy, result.candidates.end());
  ASSERT_TRUE(copy->quick_reference);
  EXPECT_EQ(copy->quick_reference->outcome, ComparisonOutcome::tie);
  EXPECT_LE(copy->quick_reference->speedup.ci_low, 1.0);
  EXPECT_GE(copy->quick_reference->speedup.ci_high, 1.0);
  EXPECT_LE(copy->quick_score, 1.0);  // a start-of-run reference gave it about 2.0
  // result.json: the window and its outcome for each candidate.
  const nlohmann::json json = result.to_json();
  for (const nlohmann::json& c : json["candidates"]) {
    if (c["id"].get<std::string>().rfind("copy", 0) != 0) continue;
    EXPECT_EQ(c["quick_reference"]["outcome"], "tie") << c.dump(2);
  }
}

// A load that comes within one candidate's window and goes: the reference's round before the
// copy's first quick round and that round run 2x slower. One reference round before and one
// after a single quick timing (quick_rounds 1) reads the reference's own code as 0.75x of the
// reference (median 40 ms against 30; its interval, over six reference samples, still
// reaches 1); rounds interleaved (quick_rounds 3) sample the load alike on both sides: 1.00x,
// a tie (issue 21: bench/ladder/identical_cpu_rung2_*.md).
TEST_F(OptimizerQuickWindowTest, ALoadWithinTheWindowIsATieOnlyWhenInterleaved) {
  reference_worker_.loaded_times.clear();
  const auto copy_window = [&](int quick_rounds) {
    SharedLoad load;
    load.trigger = "reference_copy";
    worker_.shared_load = &load;
    reference_worker_.shared_load = &load;
    policy_.quick_rounds = quick_rounds;
    const OptimizeResult result = run(one_step());
    worker_.shared_load = reference_worker_.shared_load = nullptr;
    EXPECT_TRUE(load.triggered);
    const auto copy = std::find_if(result.candidates.begin(), result.candidates.end(),
                                   [](const CandidateRecord& c) { return c.id.rfind("copy", 0) == 0; });
    EXPECT_NE(copy, result.candidates.end());
    return copy == result.candidates.end() ? evaluation::QuickReference{} : *copy->quick_reference;
  };
  const evaluation::QuickReference bracketed = copy_window(1);
  ASSERT_EQ(bracketed.rounds_ms.size(), 2u);
  EXPECT_NEAR(bracketed.speedup.speedup, 0.75, 0.01);
  EXPECT_LT(bracketed.speedup.ci_low, 0.9);
  const evaluation::QuickReference interleaved = copy_window(3);
  ASSERT_EQ(interleaved.rounds_ms.size(), 4u);
  EXPECT_EQ(interleaved.outcome, ComparisonOutcome::tie) << nlohmann::json(interleaved).dump();
  EXPECT_NEAR(interleaved.speedup.speedup, 1.0, 0.01);
}

// The form of runs recorded before rung 1 interleaved (one round before, one after) reads as
// two reference rounds around one candidate round.
TEST(QuickReferenceJson, ReadsTheBracketedFormOfEarlierRuns) {
  const nlohmann::json old = {{"before_ms", {1.0, 2.0}}, {"after_ms", {3.0}},
                              {"median_ms", 2.0},        {"speedup", evaluation::SpeedupEstimate{}},
                              {"outcome", "tie"},        {"seconds", 0.5}};
  const auto window = old.get<evaluation::QuickReference>();
  EXPECT_EQ(window.rounds_ms, (std::vector<std::vector<double>>{{1.0, 2.0}, {3.0}}));
  EXPECT_EQ(window.candidate_rounds, 1);
  EXPECT_EQ(window.samples_ms(), (std::vector<double>{1.0, 2.0, 3.0}));
  const nlohmann::json now = window;
  EXPECT_EQ(now.get<evaluation::QuickReference>().rounds_ms, window.rounds_ms);
  EXPECT_FALSE(now.contains("before_ms"));
}

// A run that is resumed reads each candidate's window back from its row: the promotions,
// scored from those windows, come out the same, although the resumed session's reference is
// the recorded start-of-run one (40 ms).
TEST_F(OptimizerQuickWindowTest, ResumeReadsEachCandidatesWindowBack) {
  OptimizeOptions options;
  options.steps = 2;
  options.proposals_per_step = 2;
  FakeWorker baseline_worker;
  const OptimizeResult baseline = run_in(root_ / "baseline", options, baseline_worker);
  const std::vector<nlohmann::json> expected =
      report::RunDatabase::open(root_ / "baseline" / "run.sqlite")->decisions();

  fresh_store();
  reference_worker_.times = 0;  // the next run's first timing is its start-of-run one again
  FakeWorker crashing;
  crashing.crash_at_time = baseline_worker.times * 2 / 3;  // in step 2 (hints, step 1 replayed)
  EXPECT_THROW(run_in(root_ / "crashed", options, crashing), Error);
  reference_worker_.loaded_times.clear();  // the resumed session times its windows unloaded
  FakeWorker resumed_worker;
  options.resume = true;
  const OptimizeResult resumed = run_in(root_ / "crashed", options, resumed_worker);
  EXPECT_GT(resumed.replayed_candidates, 0);
  EXPECT_EQ(report::RunDatabase::open(root_ / "crashed" / "run.sqlite")->decisions(), expected);
  for (const CandidateRecord& c : resumed.candidates) {
    if (!c.median_ms || !c.duplicate_of.empty()) continue;
    ASSERT_TRUE(c.quick_reference) << c.id << (c.replayed ? " (replayed)" : "");
    EXPECT_NEAR(c.quick_reference->median_ms, 20.0, 0.1) << c.id;
  }
  EXPECT_EQ(resumed.best ? resumed.best->id : "", baseline.best ? baseline.best->id : "");
}

}  // namespace
}  // namespace kforge::search

// Rung 1 is not decided by load (issue 21): each candidate's quick speedup is over the
// reference timed just before and just after its quick timing, not over the reference timed once
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
    const auto round = static_cast<size_t>(evaluation::EvaluationPolicy{}.quick_reference.min_repetitions);
    EXPECT_EQ(c.quick_reference->before_ms.size(), round);
    EXPECT_EQ(c.quick_reference->after_ms.size(), round);
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

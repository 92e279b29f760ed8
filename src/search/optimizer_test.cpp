#include "search/optimizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/mapped_file.h"
#include "generation/templates_generator.h"
#include "memory/sqlite_store.h"
#include "search/optimizer_test_util.h"
#include "task/task_loader.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;

using namespace kforge::search::fakes;  // NOLINT: the shared fakes

class FakeProfiler : public evaluation::Profiler {
 public:
  evaluation::ProfileReport profile(const compile::Artifact& candidate, const Task&,
                                    const Workload& workload,
                                    const evaluation::ProfileInputs&) override {
    profiled.push_back(candidate.path);
    evaluation::ProfileReport report;
    report.ok = true;
    report.workload = workload.name;
    report.diagnosis = {"1 kernel launch(es)", "memory-bound: DRAM throughput 90% of peak"};
    return report;
  }
  std::vector<std::string> profiled;
};

TEST_F(OptimizerTest, ClimbsFromTheExpertHintsToAFasterCandidate) {
  OptimizeOptions options;
  options.steps = 6;
  options.proposals_per_step = 3;
  OptimizeResult result = run(options);
  ASSERT_TRUE(result.best);
  // The best expert hint (simd at defaults) runs 10 ms; the search must improve on it.
  EXPECT_LT(*result.best->median_ms, 10.0 * 0.99);
  EXPECT_GT(result.speedup.speedup, 2.0);
  EXPECT_LE(result.speedup.ci_low, result.speedup.speedup);
  EXPECT_GE(result.speedup.ci_high, result.speedup.speedup);
  EXPECT_TRUE(fs::exists(result.best_source_path));
}

// A second parametrized decomposition, "blocked", 100x slower than simd at any parameters (and
// serial, which has no parameters to refine, slowed alike so that simd is the best from step 1).
class OptimizerDiversityTest : public OptimizerTest {
 protected:
  void SetUp() override {
    OptimizerTest::SetUp();
    const fs::path family = root_ / "kernels" / "cpu" / "toy";
    std::ofstream(family / "blocked.cpp") << "blocked\n";
    std::ofstream(family / "family.toml", std::ios::app) << R"(
[[variants]]
name = "blocked"
source = "blocked.cpp"
decomposition = "row_blocked"
[variants.params]
ACCUMULATORS = [1, 2, 4, 8]
PARALLEL = [0, 1]
)";
    worker_.slow_on = [](const std::string& path, const std::string&) {
      return path.find("blocked.cpp") != std::string::npos ||
             path.find("serial.cpp") != std::string::npos;
    };
  }
  /// Step candidates whose parent is a blocked candidate, and all step candidates. A blocked
  /// parent's child is blocked too (the diversity slot tunes; it does not switch).
  static std::pair<int, int> refined_blocked(const OptimizeResult& result) {
    int blocked = 0, all = 0;
    for (const CandidateRecord& c : result.candidates) {
      if (c.step == 0) continue;
      ++all;
      if (c.parent_id.rfind("blocked", 0) == 0) {
        ++blocked;
        EXPECT_EQ(c.id.rfind("blocked", 0), 0u) << c.id << " from " << c.parent_id;
      }
    }
    return {blocked, all};
  }
};

TEST_F(OptimizerDiversityTest, EachStepRefinesTheBestOfAnotherDecomposition) {
  OptimizeOptions options;
  options.steps = 2;
  options.proposals_per_step = 3;
  const OptimizeResult result = run(options);
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->id.rfind("simd", 0), 0u) << result.best->id;
  const auto [blocked, all] = refined_blocked(result);
  EXPECT_EQ(all, 6);
  EXPECT_EQ(blocked, 2);  // one slot per step (serial, faster on ties, has no move to offer)
}

TEST_F(OptimizerDiversityTest, NoDiversitySlotsRefineTheBestFirst) {
  OptimizeOptions options;
  options.steps = 2;  // simd has 7 untried neighbours: enough for every slot
  options.proposals_per_step = 3;
  options.diversity_slots = 0;
  EXPECT_EQ(refined_blocked(run(options)).first, 0);
}

TEST_F(OptimizerDiversityTest, OneProposalPerStepAlwaysRefinesTheBest) {
  OptimizeOptions options;
  options.steps = 3;
  options.proposals_per_step = 1;
  options.diversity_slots = 5;  // clamped to proposals - 1 = 0
  EXPECT_EQ(refined_blocked(run(options)).first, 0);
}

// The reference's worker process killed in the middle of a timing (kill -9, out of memory): the
// call is made once more in a fresh worker and the run goes on; a second death ends it, naming
// the verdict.
TEST_F(OptimizerTest, AReferenceWorkerThatDiesInATimingIsRetriedOnce) {
  reference_worker_.died_at_times = {1};
  OptimizeOptions options;
  options.steps = 1;
  const OptimizeResult result = run(options);
  ASSERT_TRUE(result.best);
  EXPECT_GT(result.speedup.speedup, 1.0);
}

TEST_F(OptimizerTest, AReferenceWorkerThatDiesTwiceInARowEndsTheRun) {
  reference_worker_.died_at_times = {1, 2};
  OptimizeOptions options;
  options.steps = 1;
  try {
    run(options);
    FAIL() << "the run went on with a reference that cannot be timed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker_crashed"), std::string::npos) << e.what();
  }
}

TEST_F(OptimizerTest, FailedCandidatesAreResultsNotExceptions) {
  OptimizeOptions options;
  options.steps = 1;
  OptimizeResult result = run(options);
  bool saw_wrong = false;
  for (const CandidateRecord& c : result.candidates) {
    saw_wrong = saw_wrong || (c.id.rfind("tiled", 0) == 0 && c.verdict == Verdict::wrong_answer);
  }
  EXPECT_TRUE(saw_wrong);
  EXPECT_TRUE(fs::exists(root_ / "run0" / "candidates"));
}

TEST_F(OptimizerTest, EveryStepCandidateIsRecordedAsEvidence) {
  OptimizeOptions options;
  options.steps = 3;
  OptimizeResult result = run(options);
  int step_candidates = 0;
  for (const CandidateRecord& c : result.candidates) step_candidates += c.step > 0;
  EXPECT_GT(step_candidates, 0);
  EXPECT_EQ(store_->evidence_count(), step_candidates);
}

TEST_F(OptimizerTest, EvidenceCarriesThePrefixMostRecentFirstAndTheDiagnosis) {
  OptimizeOptions options;
  options.steps = 3;
  options.proposals_per_step = 1;
  OptimizeResult result = run(options);
  std::vector<std::string> directions;
  for (const CandidateRecord& c : result.candidates) {
    if (c.step > 0) directions.push_back(c.direction_id);
  }
  std::vector<memory::Evidence> rows = store_->evidence("cpu");
  ASSERT_EQ(rows.size(), directions.size());
  ASSERT_GE(rows.size(), 2u);
  EXPECT_TRUE(rows[0].prefix.empty());
  EXPECT_EQ(rows[1].prefix, std::vector<std::string>{directions[0]});
  if (rows.size() >= 3) {
    EXPECT_EQ(rows[2].prefix, (std::vector<std::string>{directions[1], directions[0]}));
  }
  EXPECT_NE(rows[0].diagnosis.find("verdict=ok"), std::string::npos) << rows[0].diagnosis;
  EXPECT_EQ(rows[0].provenance.family, "toy");
  // Each step's event names its moves and the direction chosen before it, the lag-1 edge its
  // evidence updates (report.html highlights it on the memory's graph).
  const std::vector<nlohmann::json> steps = events_of(result.run_dir, "step");
  ASSERT_EQ(steps.size(), directions.size());
  EXPECT_TRUE(steps[0].at("after").is_null());
  EXPECT_EQ(steps[0].at("moves").at(0).at("direction"), directions[0]);
  EXPECT_EQ(steps[1].at("after"), directions[0]);
  EXPECT_EQ(steps[1].at("moves").at(0).at("direction"), directions[1]);
  EXPECT_EQ(steps[1].at("moves").at(0).at("strategy"), rows[1].strategy_id);
}

TEST_F(OptimizerTest, EveryPolicyRunsAndOneshotMakesOneCandidate) {
  for (memory::PolicyKind kind : {memory::PolicyKind::flat, memory::PolicyKind::feedback,
                                  memory::PolicyKind::random, memory::PolicyKind::oneshot}) {
    OptimizeOptions options;
    options.steps = 2;
    options.policy = kind;
    std::vector<std::string> lines;
    OptimizeResult result = run(options, &lines);
    ASSERT_TRUE(result.best) << memory::to_string(kind);
    int step_candidates = 0;
    for (const CandidateRecord& c : result.candidates) step_candidates += c.step > 0;
    if (kind == memory::PolicyKind::oneshot) {
      EXPECT_EQ(step_candidates, 1);
    } else {
      EXPECT_GT(step_candidates, 1) << memory::to_string(kind);
    }
    bool named = false;
    for (const std::string& line : lines) named = named || line == "policy: " + memory::to_string(kind);
    EXPECT_TRUE(named) << memory::to_string(kind);
  }
  OptimizeOptions ablated;
  ablated.steps = 1;
  ablated.ablations.prefix = true;
  std::vector<std::string> lines;
  run(ablated, &lines);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "policy: htam (ablated: prefix)"), lines.end());
}

TEST_F(OptimizerTest, SameSeedSameDecisions) {
  OptimizeOptions options;
  options.steps = 4;
  options.seed = 42;
  OptimizeResult first = run(options);
  // A fresh memory so that the second run sees the same graph the first one saw.
  store_ = memory::SqliteStore::open(":memory:",
                                     fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml");
  OptimizeResult second = run(options);
  ASSERT_EQ(first.candidates.size(), second.candidates.size());
  for (size_t i = 0; i < first.candidates.size(); ++i) {
    EXPECT_EQ(first.candidates[i].id, second.candidates[i].id);
  }
}

TEST_F(OptimizerTest, WorkloadThatDoesNotFitTheDeviceStopsTheRunBeforeItStarts) {
  reference_worker_.memory_bytes = int64_t{4} << 20;  // 4 MiB; the timed workload needs 8 MiB
  try {
    run(OptimizeOptions{});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workload 'big' needs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(worker_.runs, 0);
}

TEST_F(OptimizerTest, ResultJsonCarriesTheFinalNumbers) {
  OptimizeOptions options;
  options.steps = 2;
  nlohmann::json json = run(options).to_json();
  EXPECT_FALSE(json["best"].is_null());
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 1.0);
  EXPECT_EQ(json["bytes_moved"].get<int64_t>(), 2 * (1 << 20) * 4);
  EXPECT_EQ(json["device"]["name"], "fake cpu");
  // The final rounds' raw samples, which the summaries are of (the report plots them).
  const nlohmann::json& final = json["final"];
  ASSERT_EQ(final["reference_rounds_ms"].size(), final["best_rounds_ms"].size());
  ASSERT_FALSE(final["best_rounds_ms"].empty()) << final.dump(2);
  size_t samples = 0;
  for (const nlohmann::json& round : final["best_rounds_ms"]) samples += round.size();
  EXPECT_EQ(samples, final["best"]["count"].get<size_t>());
}

// What `kforge eval --record` left in the memory for this task is announced at the start, with
// the fastest correct kernel; another task's record is not.
TEST_F(OptimizerTest, KernelsRecordedByEvalForThisTaskAreAnnounced) {
  memory::RecordedRun run;
  run.task = task_.name;
  run.provenance = {"cpu", "fake cpu", "", "g++", "toy", task_hash(task_)};
  memory::RecordedCandidate slow{"k1", "/me/slow.cpp", "src", "ok", "", "", 2.0, 4.0, 2.0, 1.9, 2.1,
                                 0.95};
  memory::RecordedCandidate fast = slow;
  fast.source_name = "/me/fast.cpp";
  fast.speedup = 3.5;
  memory::RecordedCandidate wrong{
      "k3", "/me/wrong.cpp", "src", "wrong_answer", "y[0]", "rungs 0-1", {}, {}, {}, {}, {}, {}};
  for (const memory::RecordedCandidate& c : {slow, fast, wrong}) {
    run.candidates = {c};
    store_->record_run(run);
  }
  run.provenance.task_hash = "another task";
  run.candidates = {fast};
  run.candidates[0].speedup = 9.0;
  store_->record_run(run);

  OptimizeOptions options;
  options.steps = 1;
  std::vector<std::string> lines;
  run_in(root_ / "run0", options, worker_, &lines);
  const auto said = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.starts_with("memory: ");
  });
  ASSERT_NE(said, lines.end());
  EXPECT_NE(said->find("3 kernel(s) of this task evaluated with kforge eval --record, 2 correct; "
                       "the fastest 3.500x over the reference (/me/fast.cpp on fake cpu"),
            std::string::npos)
      << *said;
  const std::vector<nlohmann::json> events = events_of(root_ / "run0", "recorded_runs");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 3);
  EXPECT_EQ(events[0]["fastest"]["candidates"][0]["source_name"], "/me/fast.cpp");
  EXPECT_FALSE(events[0]["fastest"]["candidates"][0].contains("source"));
}

TEST_F(OptimizerTest, AMemoryWithoutRecordedKernelsAnnouncesNothing) {
  OptimizeOptions options;
  options.steps = 1;
  std::vector<std::string> lines;
  run(options, &lines);
  for (const std::string& line : lines) EXPECT_FALSE(line.starts_with("memory: ")) << line;
  EXPECT_TRUE(events_of(root_ / "run0", "recorded_runs").empty());
}

TEST_F(OptimizerTest, SuccessiveHalvingPromotesATopThirdOfEachStepToTheFullRung) {
  OptimizeOptions options;
  options.steps = 3;
  const OptimizeResult result = run(options);
  ASSERT_TRUE(result.best);
  // Every correct candidate got exactly one decision; per step, ceil(n / 3) plus possibly the
  // best were promoted, and exactly the promoted ones ran rung 2.
  std::map<int, int> correct_per_step, promoted_per_step;
  std::set<std::string> promoted;
  for (const CandidateRecord& c : result.candidates) {
    if (c.verdict != Verdict::ok) {
      EXPECT_FALSE(c.promotion) << c.id;
      continue;
    }
    ++correct_per_step[c.step];
    ASSERT_TRUE(c.promotion) << c.id;
    if (c.promotion == PromotionOutcome::promoted) {
      ++promoted_per_step[c.step];
      promoted.insert(c.id);
      EXPECT_GE(rung_number(c.rung), 2) << c.id;
    } else {
      EXPECT_EQ(c.rung, Rung::quick) << c.id;
      EXPECT_FALSE(c.full_geomean_speedup) << c.id;
    }
    EXPECT_GT(c.quick_score, 0.0);
    // A lower bound of the speedup (the reference's quick median is 20 ms + 0.1% noise).
    EXPECT_LE(c.quick_score, 20.05 / *c.median_ms);
  }
  for (const auto& [step, n] : correct_per_step) {
    const int quota = (n + 2) / 3;
    EXPECT_GE(promoted_per_step[step], quota) << "step " << step;
    EXPECT_LE(promoted_per_step[step], quota + 1) << "step " << step;  // + the best
  }
  std::set<std::string> measured;
  for (const nlohmann::json& e : events_of(root_ / "run0", "full_rung")) {
    measured.insert(e["candidate"].get<std::string>());
  }
  EXPECT_EQ(measured, promoted);
  // The ladder defers the timed workload's gate case: every promoted candidate ran it, once,
  // before rung 2 (or before it became the best), each run an event.
  std::multiset<std::string> gated;
  for (const nlohmann::json& e : events_of(root_ / "run0", "gate_at_full_size")) {
    EXPECT_EQ(e["verdict"], "ok") << e.dump();
    gated.insert(e["id"].get<std::string>());
  }
  for (const std::string& id : promoted) EXPECT_EQ(gated.count(id), 1u) << id;
  EXPECT_EQ(events_of(root_ / "run0", "promotion").size(),
            static_cast<size_t>(std::accumulate(correct_per_step.begin(), correct_per_step.end(),
                                                0, [](int a, auto& p) { return a + p.second; })));
  ASSERT_TRUE(result.best->full_geomean_speedup);
  // One timed workload ("big"): its geomean is its speedup, reference 20 ms over the best.
  EXPECT_NEAR(*result.best->full_geomean_speedup, 20.0 / *result.best->median_ms, 0.05);
  EXPECT_EQ(result.best->rung, Rung::final);
  EXPECT_EQ(result.rung_occupancy[3], 1);
  EXPECT_TRUE(fs::exists(root_ / "run0" / fs::path(result.best->source_file).parent_path() /
                         "full_rung.json"));
}

TEST_F(OptimizerTest, APromotedCandidatesFullRungResultGoesToTheMemoryUpdate) {
  task_.workloads.push_back({"other", {{"n", 1 << 16}}, true});
  worker_.slow_on = [](const std::string&, const std::string& workload) {
    return workload == "other";  // every candidate 100x slower there: geomean = speedup / 10
  };
  OptimizeOptions options;
  options.steps = 2;
  const OptimizeResult result = run(options);
  int checked = 0;
  for (const memory::Evidence& e : store_->evidence("cpu")) {
    for (const CandidateRecord& c : result.candidates) {
      if (c.artifact_key != e.candidate_id || !e.speedup_vs_baseline) continue;
      if (c.full_geomean_speedup) {
        EXPECT_DOUBLE_EQ(*e.speedup_vs_baseline, *c.full_geomean_speedup);
        ++checked;
      } else {
        EXPECT_NEAR(*e.speedup_vs_baseline, 20.0 / *c.median_ms, 0.01 * 20.0 / *c.median_ms);
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_F(OptimizerTest, FullFidelityGivesEveryCorrectCandidateTheFullRung) {
  OptimizeOptions options;
  options.steps = 2;
  options.fidelity = Fidelity::full;
  std::vector<std::string> lines;
  const OptimizeResult result = run(options, &lines);
  ASSERT_TRUE(result.best);
  int correct = 0;
  for (const CandidateRecord& c : result.candidates) {
    if (c.verdict != Verdict::ok) continue;
    ++correct;
    EXPECT_EQ(c.promotion, PromotionOutcome::promoted) << c.id;
    EXPECT_TRUE(c.full_geomean_speedup) << c.id;
    // The quick rung ran with the full policy: 3 rounds of 7 repetitions (20 / 3 rounded up),
    // not of 4 (10 / 3).
    EXPECT_EQ(c.quick_samples_ms.size(), 21u) << c.id;
  }
  EXPECT_EQ(events_of(root_ / "run0", "full_rung").size(), static_cast<size_t>(correct));
  const nlohmann::json json = result.to_json();
  EXPECT_EQ(json["fidelity"], "full");
  EXPECT_EQ(json["to_final_best"]["candidate"], result.best->id);
  EXPECT_GT(json["to_final_best"]["device_s"].get<double>(), -1.0);
  EXPECT_LE(json["to_final_best"]["device_s"].get<double>(),
            json["budget"]["spent"]["device_s"].get<double>());
}

TEST_F(OptimizerTest, ProgressShowsRungOccupancy) {
  OptimizeOptions options;
  options.steps = 1;
  std::vector<std::string> lines;
  const OptimizeResult result = run(options, &lines);
  std::string last;
  for (const std::string& line : lines) {
    if (line.rfind("progress: done", 0) == 0) last = line;
  }
  const auto& r = result.rung_occupancy;
  EXPECT_NE(last.find(fmt::format("rungs 0:{} 1:{} 2:{} 3:{}", r[0], r[1], r[2], r[3])),
            std::string::npos)
      << last;
  EXPECT_EQ(r[0] + r[1] + r[2] + r[3], static_cast<int>(result.candidates.size()));
  EXPECT_GT(r[0], 0);  // the tiled hint fails the gate
  EXPECT_EQ(r[3], 1);
}

TEST_F(OptimizerTest, FullRungReplacesABestThatIsSlowOnAnotherTimedWorkload) {
  task_.workloads.push_back({"other", {{"n", 1 << 16}}, true});
  OptimizeOptions options;
  options.steps = 3;
  const OptimizeResult baseline = run(options);
  ASSERT_TRUE(baseline.best);
  const std::string fastest_on_big = baseline.best->id;
  // The same search, but the quick rung's winner is 100x slower on the second timed workload.
  store_ = memory::SqliteStore::open(":memory:",
                                     fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml");
  std::string slow_path;
  for (const CandidateRecord& c : baseline.candidates) {
    if (c.id == fastest_on_big) slow_path = c.artifact_key;
  }
  ASSERT_FALSE(slow_path.empty());
  worker_.slow_on = [&](const std::string& path, const std::string& workload) {
    return workload == "other" && path == slow_path;
  };
  std::vector<std::string> lines;
  const OptimizeResult result = run(options, &lines);
  ASSERT_TRUE(result.best);
  EXPECT_NE(result.best->id, fastest_on_big);
  bool replaced = false;
  for (const std::string& line : lines) replaced |= line.find("replaces") != std::string::npos;
  EXPECT_TRUE(replaced);
}

TEST_F(OptimizerTest, ARung2ChallengerMustConfirmWhenTimedAgainBesideTheBest) {
  // A transient load: the best's rung-2 timing of the second workload (its three rounds) is
  // 100x slow (as when another process took the cores), so a slower candidate's rung-2 geomean
  // beats it. Timed again beside the best in one window, the challenger loses, and the best
  // keeps its place.
  task_.workloads.push_back({"other", {{"n", 1 << 16}}, true});
  OptimizeOptions options;
  options.steps = 3;
  const OptimizeResult baseline = run(options);
  ASSERT_TRUE(baseline.best);
  std::string best_path;
  for (const CandidateRecord& c : baseline.candidates) {
    if (c.id == baseline.best->id) best_path = c.artifact_key;
  }
  fresh_store();
  int loaded_turns = 0;
  worker_.slow_on = [&](const std::string& path, const std::string& workload) {
    return workload == "other" && path == best_path && loaded_turns++ < 3;
  };
  std::vector<std::string> lines;
  options.explain = true;
  const OptimizeResult result = run(options, &lines);
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->id, baseline.best->id);
  const std::vector<nlohmann::json> challenges = events_of(root_ / "run1", "final_challenge");
  ASSERT_FALSE(challenges.empty());
  for (const nlohmann::json& c : challenges) {
    EXPECT_EQ(c["incumbent"], baseline.best->id);
    EXPECT_NE(c["outcome"], "faster") << c.dump();
  }
  for (const std::string& line : lines) EXPECT_EQ(line.find("replaces"), std::string::npos) << line;
}

TEST_F(OptimizerTest, FinalRungProfilesTheBestWhenAProfilerIsSet) {
  FakeProfiler profiler;
  profiler_ = &profiler;
  OptimizeOptions options;
  options.steps = 1;
  const OptimizeResult result = run(options);
  ASSERT_TRUE(result.best);
  ASSERT_EQ(profiler.profiled.size(), 1u);
  EXPECT_EQ(profiler.profiled[0], result.best->artifact_key);  // FakeCompiler: key == path
  ASSERT_TRUE(result.profile);
  EXPECT_EQ(result.profile->workload, "big");
  EXPECT_EQ(result.to_json()["profile"]["diagnosis"][1],
            "memory-bound: DRAM throughput 90% of peak");
  EXPECT_EQ(events_of(root_ / "run0", "profile").size(), 1u);
}

}  // namespace
}  // namespace kforge::search

// The optimizer measures and builds only through the evaluation plane and the build queue it is
// given: a simulated plane that replays recorded medians (as kernel_tuner's simulation runner
// replays recorded results) and a build queue that never compiles run a whole search, and the
// real workers are never asked to run or time anything.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <map>
#include <string>

#include "search/optimizer.h"
#include "search/optimizer_test_util.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;

using namespace kforge::search::fakes;  // NOLINT: the shared fakes

constexpr double kReferenceMs = 20.0;

// Every kernel's recorded quick median: serial 4 ms, the tiled variant (wrong.cpp) a recorded
// wrong answer, simd 12 ms over its accumulators (PARALLEL changes nothing). On the fake worker
// the numbers differ (simd 10 ms over its accumulators, halved by PARALLEL=1), so a run that
// measured there would record other medians.
class SimulatedPlane : public evaluation::EvaluationPlane {
 public:
  SimulatedPlane(const Task& task, evaluation::EvaluationPolicy policy)
      : task_(task), policy_(std::move(policy)) {
    for (const Workload& w : task.workloads) {
      if (w.timed) timed_ = w;
    }
  }

  static double recorded_ms(const std::string& path) {
    if (path.find("serial") != std::string::npos) return 4.0;
    const auto at = path.find("KF_ACCUMULATORS=");
    return 12.0 / (at == std::string::npos ? 1.0 : std::stod(path.substr(at + 16)));
  }

  // Baseline compile: prepare() "compiles" the reference (23.4 s, or fails) and time_paired()
  // gives it a turn in each round at compiled_ms.
  evaluation::TaskReport prepare(const compile::Artifact&) override {
    if (on_prepare) on_prepare();
    evaluation::TaskReport report;
    if (policy_.baseline != BaselineKind::compile) return report;
    report.compile.ran = true;
    report.compile.ok = compiled_ms.has_value();
    report.compile.compile_ms = 23400.0;
    report.compile.median_ms = compiled_ms.value_or(0.0);
    if (!compiled_ms) report.compile.message = "runtime_error: torch.compile of p.py failed: X";
    return report;
  }
  std::string screen(const std::string&, const std::string&, const std::string&) const override {
    return "";
  }
  evaluation::CandidateEvaluation evaluate(const compile::Artifact& artifact,
                                           worker::Worker&) override {
    ++evaluated;
    evaluation::CandidateEvaluation result;
    if (artifact.verdict != Verdict::ok) {
      result.verdict = artifact.verdict;
      result.message = artifact.log;
      return result;
    }
    if (artifact.path.find("wrong.cpp") != std::string::npos) {
      result.verdict = Verdict::wrong_answer;
      result.message = "recorded: wrong answer";
      result.rungs.push_back({Rung::gate, Verdict::wrong_answer, result.message, 0.01, {}});
      return result;
    }
    result.handle = load_handle(artifact);
    result.samples_ms = samples(recorded_ms(artifact.path));
    result.timing = evaluation::summarize(result.samples_ms);
    result.quick.samples_ms = result.samples_ms;
    result.quick.summary = result.timing;
    result.rungs.push_back({Rung::gate, Verdict::ok, "", 0.01, {}});
    result.rungs.push_back({Rung::quick, Verdict::ok, "", 0.02, {}});
    return result;
  }
  worker::LoadResult load(const compile::Artifact& artifact, worker::Worker&) override {
    ++loaded;
    worker::LoadResult result;
    result.handle = load_handle(artifact);
    return result;
  }
  evaluation::TimingVerdict time_reference() override {
    evaluation::TimingVerdict verdict;
    verdict.samples_ms = samples(kReferenceMs);
    verdict.summary = evaluation::summarize(verdict.samples_ms);
    return verdict;
  }
  evaluation::FullRung full_rung(int handle, worker::Worker&) override {
    ++full_rungs;
    evaluation::FullRung full;
    evaluation::FullRung::Entry entry;
    entry.workload = timed_.name;
    entry.candidate.summary.median_ms = ms_.at(handle);
    entry.reference_median_ms = kReferenceMs;
    entry.speedup = kReferenceMs / ms_.at(handle);
    full.workloads.push_back(entry);
    full.geomean_speedup = entry.speedup;
    return full;
  }
  void prime_full_rung_reference() override {}
  PairedSamples time_paired(int handle, worker::Worker&) override {
    PairedSamples paired;
    for (int round = 0; round < policy_.final_rounds; ++round) {
      paired.reference_rounds.push_back(samples(kReferenceMs));
      paired.candidate_rounds.push_back(samples(ms_.at(handle)));
      if (policy_.baseline == BaselineKind::compile && compiled_ms) {
        ++compile_turns;
        paired.compile_rounds.push_back(samples(*compiled_ms));
      }
    }
    return paired;
  }
  evaluation::CompareOutcome compare(int incumbent, int challenger, worker::Worker&) override {
    ++comparisons;
    evaluation::PairedComparison paired;
    paired.speedup.speedup = ms_.at(incumbent) / ms_.at(challenger);
    paired.speedup.ci_low = paired.speedup.speedup * 0.99;
    paired.speedup.ci_high = paired.speedup.speedup * 1.01;
    paired.outcome = paired.speedup.ci_low > 1.0 + policy_.min_gain ? ComparisonOutcome::faster
                                                                    : ComparisonOutcome::tie;
    return {paired, -1, Verdict::ok, ""};
  }
  // One timed workload: rung 2's challenge is the same comparison.
  evaluation::CompareOutcome compare_on(const std::string&, int incumbent, int challenger,
                                        worker::Worker& on) override {
    return compare(incumbent, challenger, on);
  }
  const Workload& timed_workload() const override { return timed_; }
  const evaluation::EvaluationPolicy& policy() const override { return policy_; }

  std::function<void()> on_prepare;  // called when the reference is prepared
  int evaluated = 0;
  int loaded = 0;
  int full_rungs = 0;
  int comparisons = 0;
  int compile_turns = 0;
  std::optional<double> compiled_ms;  // torch.compile of the reference; nullopt: fails

 private:
  static std::vector<double> samples(double ms) { return {ms, ms * 1.001, ms * 1.002, ms}; }
  int load_handle(const compile::Artifact& artifact) {
    ms_[next_handle_] = recorded_ms(artifact.path);
    return next_handle_++;
  }

  const Task& task_;
  evaluation::EvaluationPolicy policy_;
  Workload timed_;
  std::map<int, double> ms_;  // handle -> recorded median
  int next_handle_ = 0;
};

// A build queue that "builds" at once, without a compiler: the artifact path names the source
// and its defines (what SimulatedPlane looks the recorded median up by).
class InstantBuilds : public compile::BuildQueue {
 public:
  std::future<compile::Artifact> submit(compile::CompileJob job) override {
    ++submitted;
    compile::Artifact artifact;
    artifact.path = job.source_name;
    for (const auto& [k, v] : job.defines) artifact.path += ";" + k + "=" + v;
    artifact.key = artifact.path;
    std::promise<compile::Artifact> built;
    built.set_value(artifact);
    return built.get_future();
  }
  std::string toolchain(const std::string&) override { return "simulated-cc 0.1"; }
  int submitted = 0;
};

class OptimizerPlaneTest : public OptimizerTest {
 protected:
  OptimizeResult run_simulated(SimulatedPlane& plane, InstantBuilds& builds,
                               OptimizeOptions options, const fs::path& dir,
                               const std::string& backend = "cpu") {
    generation::TemplatesGenerator generator(
        generation::load_family((root_ / "kernels").string(), "cpu", "toy"));
    report::RunDirectory run_dir(dir, options.resume ? report::RunDirectory::Mode::resume
                                                     : report::RunDirectory::Mode::create);
    Optimizer optimizer(task_, backend, options, *store_, generator, plane, builds, {&worker_},
                        reference_worker_, run_dir, [](const std::string&) {});
    return optimizer.run();
  }
  static evaluation::EvaluationPolicy simulated_policy() {
    evaluation::EvaluationPolicy policy;
    policy.min_gain = 0.05;
    policy.final_rounds = 3;
    return policy;
  }
};

TEST_F(OptimizerPlaneTest, MeasuresAndBuildsOnlyThroughTheInjectedPlaneAndQueue) {
  SimulatedPlane plane(task_, simulated_policy());
  InstantBuilds builds;
  OptimizeOptions options;
  options.steps = 4;
  const OptimizeResult result = run_simulated(plane, builds, options, root_ / "simulated");

  // Nothing ran or was timed on the real workers: every number is the plane's.
  EXPECT_EQ(worker_.runs + worker_.times, 0);
  EXPECT_EQ(reference_worker_.runs + reference_worker_.times, 0);
  EXPECT_EQ(result.toolchain, "simulated-cc 0.1");
  EXPECT_GT(builds.submitted, 0);
  ASSERT_FALSE(result.candidates.empty());
  EXPECT_EQ(plane.evaluated, static_cast<int>(result.candidates.size()));
  for (const CandidateRecord& c : result.candidates) {
    if (c.verdict != Verdict::ok) continue;
    EXPECT_NEAR(*c.median_ms, SimulatedPlane::recorded_ms(c.artifact_key), 0.01) << c.id;
  }
  ASSERT_TRUE(result.best);
  const double best_ms = SimulatedPlane::recorded_ms(result.best->artifact_key);
  EXPECT_LT(best_ms, 4.0);  // a simd candidate beat serial through the plane's comparison
  EXPECT_NEAR(result.speedup.speedup, kReferenceMs / best_ms, 0.05);
  EXPECT_GT(plane.comparisons, 0);
  EXPECT_GT(plane.full_rungs, 0);
  // The run's evaluation policy is the plane's: the run database records its knobs.
  auto db = report::RunDatabase::open(root_ / "simulated" / "run.sqlite");
  EXPECT_EQ(db->meta("options")->at("min_gain"), 0.05);
  EXPECT_EQ(db->meta("options")->at("final_rounds"), 3);
}

TEST_F(OptimizerPlaneTest, WhereBuildsOverlapTimingsTheHintsCompileWhileTheReferenceIsPrepared) {
  // cuda (builds overlap timings): step 0's builds are queued before the reference worker
  // prepares, so nvcc runs while the expected outputs are computed; cpu keeps its compilers off
  // the cores that time the reference.
  task_.reference_paths["cuda"] = task_.reference_paths.at("cpu");  // built by InstantBuilds
  for (const std::string backend : {"cuda", "cpu"}) {
    SimulatedPlane plane(task_, simulated_policy());
    InstantBuilds builds;
    int queued_at_prepare = -1;
    plane.on_prepare = [&] { queued_at_prepare = builds.submitted; };
    OptimizeOptions options;
    options.steps = 0;
    const OptimizeResult result =
        run_simulated(plane, builds, options, root_ / ("early-" + backend), backend);
    ASSERT_TRUE(result.best) << backend;
    const int hints = static_cast<int>(result.candidates.size());
    ASSERT_GT(hints, 1);
    // The native reference's own build is queued just before it is prepared.
    EXPECT_EQ(queued_at_prepare, (backend == "cuda" ? hints : 0) + 1) << backend;
    EXPECT_EQ(builds.submitted, hints + 1) << backend;  // each hint built once either way
    EXPECT_EQ(plane.evaluated, hints) << backend;
  }
}

TEST_F(OptimizerPlaneTest, AResumedCudaRunBuildsItsHintsEarlyButEvaluatesNoneAgain) {
  // The early builds start before the run's journal is open: a resumed run builds its replayed
  // hints too (the artifact cache answers), and must not evaluate them.
  task_.reference_paths["cuda"] = task_.reference_paths.at("cpu");
  OptimizeOptions options;
  options.steps = 0;
  SimulatedPlane first(task_, simulated_policy());
  InstantBuilds first_builds;
  const OptimizeResult recorded =
      run_simulated(first, first_builds, options, root_ / "cuda-run", "cuda");
  ASSERT_TRUE(recorded.best);
  options.resume = true;
  SimulatedPlane replay(task_, simulated_policy());
  InstantBuilds replay_builds;
  const OptimizeResult resumed =
      run_simulated(replay, replay_builds, options, root_ / "cuda-run", "cuda");
  EXPECT_EQ(replay.evaluated, 0);
  ASSERT_TRUE(resumed.best);
  EXPECT_EQ(resumed.best->id, recorded.best->id);
}

TEST_F(OptimizerPlaneTest, AResumedRunReplaysEveryDecisionWithoutMeasuringAgain) {
  OptimizeOptions options;
  options.steps = 4;
  SimulatedPlane first(task_, simulated_policy());
  InstantBuilds first_builds;
  const OptimizeResult recorded = run_simulated(first, first_builds, options, root_ / "run");
  ASSERT_TRUE(recorded.best);
  ASSERT_GT(first.comparisons, 0);

  options.resume = true;
  SimulatedPlane replay(task_, simulated_policy());
  InstantBuilds replay_builds;
  const OptimizeResult resumed = run_simulated(replay, replay_builds, options, root_ / "run");
  // Rungs 0-2 and the acceptance comparisons are read back; only the final rung is measured
  // again, on the best loaded from a rebuild.
  EXPECT_EQ(replay.evaluated, 0);
  EXPECT_EQ(replay.comparisons, 0);
  EXPECT_EQ(replay.full_rungs, 0);
  EXPECT_GE(replay.loaded, 1);
  EXPECT_EQ(resumed.replayed_candidates, static_cast<int>(recorded.candidates.size()));
  ASSERT_TRUE(resumed.best);
  EXPECT_EQ(resumed.best->id, recorded.best->id);
  EXPECT_EQ(resumed.best->full_geomean_speedup, recorded.best->full_geomean_speedup);
}

TEST_F(OptimizerPlaneTest, TimesTorchCompileWithTheBestAndReportsItsCompileTimeApart) {
  evaluation::EvaluationPolicy policy = simulated_policy();
  policy.baseline = BaselineKind::compile;
  SimulatedPlane plane(task_, policy);
  plane.compiled_ms = 10.0;  // twice as fast as eager
  InstantBuilds builds;
  OptimizeOptions options;
  options.steps = 2;
  options.compile_baseline.source = CompileBaselinePlan::Source::measure;
  const OptimizeResult result = run_simulated(plane, builds, options, root_ / "compiled");
  ASSERT_TRUE(result.best && result.compile_baseline);
  const CompileBaselineResult& compile = *result.compile_baseline;
  EXPECT_EQ(compile.status, CompileBaselineStatus::measured);
  EXPECT_DOUBLE_EQ(compile.compile_s, 23.4);
  EXPECT_EQ(plane.compile_turns, 3);  // one per final round
  ASSERT_TRUE(compile.over_eager && compile.best_speedup && compile.final);
  EXPECT_NEAR(compile.over_eager->speedup, 2.0, 1e-9);
  const double best_ms = SimulatedPlane::recorded_ms(result.best->artifact_key);
  EXPECT_NEAR(compile.best_speedup->speedup, 10.0 / best_ms, 0.01 * 10.0 / best_ms);
  EXPECT_NEAR(result.speedup.speedup, kReferenceMs / best_ms, 0.05);  // eager's, unchanged
  EXPECT_EQ(compile.compile_samples_ms.size(), 12u);
  const nlohmann::json json = result.to_json();
  EXPECT_EQ(json["baseline"], "compile");
  EXPECT_EQ(json["compile_baseline"]["status"], "measured");
  EXPECT_NEAR(json["final"]["speedup_vs_compile"]["speedup"].get<double>(),
              compile.best_speedup->speedup, 1e-12);
  EXPECT_NEAR(json["final"]["compile"]["median_ms"].get<double>(), 10.0, 0.02);
}

TEST_F(OptimizerPlaneTest, ACachedCompileRatioStandsInForCompilingAndSaysFromWhen) {
  SimulatedPlane plane(task_, simulated_policy());  // eager: nothing is compiled
  plane.compiled_ms = 10.0;
  InstantBuilds builds;
  OptimizeOptions options;
  options.steps = 2;
  options.compile_baseline.source = CompileBaselinePlan::Source::cache;
  CachedCompileBaseline cached;
  cached.over_eager = {2.0, 1.9, 2.1, 0.95};
  cached.eager_median_ms = kReferenceMs;
  cached.compile_s = 31.0;
  cached.measured_at = "2025-06-01T10:00:00Z";
  cached.run_dir = "/runs/earlier";
  options.compile_baseline.cached = cached;
  OptimizeResult result = run_simulated(plane, builds, options, root_ / "cached");
  ASSERT_TRUE(result.best && result.compile_baseline);
  EXPECT_EQ(plane.compile_turns, 0);
  EXPECT_EQ(result.compile_baseline->status, CompileBaselineStatus::cached);
  ASSERT_TRUE(result.compile_baseline->best_speedup);
  EXPECT_NEAR(result.compile_baseline->best_speedup->speedup, result.speedup.speedup / 2.0, 1e-9);
  EXPECT_LT(result.compile_baseline->best_speedup->ci_low, result.speedup.ci_low / 2.0);
  EXPECT_TRUE(result.compile_baseline->drift_warning.empty());
  EXPECT_EQ(result.to_json()["compile_baseline"]["cached"]["measured_at"], "2025-06-01T10:00:00Z");

  // The eager reference took half as long when the ratio was cached: said, not hidden.
  cached.eager_median_ms = kReferenceMs / 2;
  options.compile_baseline.cached = cached;
  SimulatedPlane again(task_, simulated_policy());
  InstantBuilds again_builds;
  result = run_simulated(again, again_builds, options, root_ / "drifted");
  ASSERT_TRUE(result.compile_baseline);
  EXPECT_NE(result.compile_baseline->drift_warning.find("the cached ratio may not hold"),
            std::string::npos)
      << result.compile_baseline->drift_warning;
}

TEST_F(OptimizerPlaneTest, AModuleThatFailsToCompileLeavesTheRunAgainstEager) {
  evaluation::EvaluationPolicy policy = simulated_policy();
  policy.baseline = BaselineKind::compile;
  SimulatedPlane plane(task_, policy);  // compiled_ms unset: the compile fails
  InstantBuilds builds;
  OptimizeOptions options;
  options.steps = 1;
  options.compile_baseline.source = CompileBaselinePlan::Source::measure;
  const OptimizeResult result = run_simulated(plane, builds, options, root_ / "failed");
  ASSERT_TRUE(result.best && result.compile_baseline);
  EXPECT_EQ(result.compile_baseline->status, CompileBaselineStatus::failed);
  EXPECT_EQ(result.compile_baseline->message, "runtime_error: torch.compile of p.py failed: X");
  EXPECT_FALSE(result.compile_baseline->best_speedup);
  EXPECT_GT(result.speedup.speedup, 1.0);
  EXPECT_TRUE(result.to_json()["final"]["speedup_vs_compile"].is_null());
}

}  // namespace
}  // namespace kforge::search

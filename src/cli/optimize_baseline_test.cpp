#include "cli/optimize_baseline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "common/hash.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;
using Source = search::CompileBaselinePlan::Source;

class OptimizeBaselineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_optimize_baseline_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    problem_ = dir_ / "softmax.py";
    write_file_atomically(problem_, "class Model: pass\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A PyTorch task as derived from problem_ (its problem_sha256 is the file's, as derive.py
  // computes it), with a gate workload and the timed one.
  Task torch_task() const {
    Task task;
    task.source_path = problem_.string();
    task.workloads = {{"gate_small", {{"rows", 3}, {"cols", 37}}, false},
                      {"problem", {{"rows", 4096}, {"cols", 1024}}, true}};
    task.torch_reference = {{"problem_sha256", sha256_hex(read_file(problem_))}};
    return task;
  }
  static worker::DeviceInfo h200() {
    worker::DeviceInfo device;
    device.backend = "cuda";
    device.name = "NVIDIA H200";
    device.runtime_version = "torch 2.11.0+cu128";
    return device;
  }
  // What a run with a measured torch.compile baseline reports.
  static search::OptimizeResult measured_run() {
    search::OptimizeResult result;
    result.run_dir = "/runs/first";
    result.reference_final.median_ms = 1.2;
    search::CompileBaselineResult compile;
    compile.status = search::CompileBaselineStatus::measured;
    compile.compile_s = 23.5;
    compile.compile_samples_ms = {0.79, 0.8, 0.81};
    compile.eager_samples_ms = {1.19, 1.2, 1.21};
    compile.final = evaluation::summarize(compile.compile_samples_ms);
    compile.over_eager = evaluation::SpeedupEstimate{1.5, 1.45, 1.55, 0.95};
    compile.best_speedup = evaluation::SpeedupEstimate{2.0, 1.9, 2.1, 0.95};
    result.compile_baseline = compile;
    return result;
  }

  fs::path dir_;
  fs::path problem_;
};

TEST_F(OptimizeBaselineTest, KeyIsTheProblemHashTheTimedDimsTheDeviceAndThePyTorch) {
  const report::BaselineKey key = baseline_key(torch_task(), h200(), BaselineKind::compile);
  EXPECT_EQ(key.problem_sha256, sha256_hex("class Model: pass\n"));
  EXPECT_EQ(key.dims, R"({"cols":1024,"rows":4096})");
  EXPECT_EQ(key.backend, "cuda");
  EXPECT_EQ(key.device, "NVIDIA H200");
  EXPECT_EQ(key.torch_version, "torch 2.11.0+cu128");
  EXPECT_EQ(key.kind, BaselineKind::compile);
  Task native = torch_task();
  native.torch_reference = nullptr;
  EXPECT_THROW(baseline_key(native, h200(), BaselineKind::eager), Error);
  Task unhashed = torch_task();
  unhashed.torch_reference = nlohmann::json::object();
  try {
    baseline_key(unhashed, h200(), BaselineKind::eager);
    FAIL() << "keyed a task without problem_sha256";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("problem_sha256: missing"), std::string::npos);
  }
}

TEST_F(OptimizeBaselineTest, TheCacheFollowsWhatAMeasuredRunWroteAndAChangedProblemMisses) {
  const Task task = torch_task();
  std::ostringstream notes;
  record_baselines(BaselineCacheMode::use, task, h200(), (dir_ / "cache").string(),
                   measured_run(), notes);
  EXPECT_EQ(notes.str(), "");
  auto cache = report::BaselineCache::open(report::BaselineCache::file_in(dir_ / "cache"));
  const auto compiled = cache->find(baseline_key(task, h200(), BaselineKind::compile));
  const auto eager = cache->find(baseline_key(task, h200(), BaselineKind::eager));
  ASSERT_TRUE(compiled && eager);
  EXPECT_DOUBLE_EQ(compiled->median_ms, 0.8);
  EXPECT_DOUBLE_EQ(compiled->compile_s, 23.5);
  EXPECT_DOUBLE_EQ(compiled->eager_median_ms, 1.2);
  EXPECT_EQ(compiled->run_dir, "/runs/first");
  EXPECT_FALSE(compiled->measured_at.empty());
  EXPECT_EQ(eager->samples_ms, (std::vector<double>{1.19, 1.2, 1.21}));

  // The next run takes the ratio instead of compiling.
  const search::CompileBaselinePlan plan =
      plan_compile_baseline(BaselineKind::compile, BaselineCacheMode::use, task, compiled);
  ASSERT_EQ(plan.source, Source::cache);
  ASSERT_TRUE(plan.cached);
  EXPECT_TRUE(plan.cached->ok);
  EXPECT_DOUBLE_EQ(plan.cached->over_eager.speedup, 1.5);
  EXPECT_DOUBLE_EQ(plan.cached->compile_s, 23.5);
  EXPECT_EQ(plan.cached->measured_at, compiled->measured_at);

  // An edited problem file is derived with its new hash: nothing cached applies to it.
  write_file_atomically(problem_, "class Model: pass  # edited\n");
  EXPECT_FALSE(cache->find(baseline_key(torch_task(), h200(), BaselineKind::compile)));
  // Nor on another PyTorch.
  worker::DeviceInfo newer = h200();
  newer.runtime_version = "torch 2.12.0";
  EXPECT_FALSE(cache->find(baseline_key(task, newer, BaselineKind::compile)));
}

TEST_F(OptimizeBaselineTest, PlanMeasuresUnlessTheCacheHasAnAnswer) {
  const Task task = torch_task();
  report::BaselineEntry ok;
  ok.over_eager = evaluation::SpeedupEstimate{1.5, 1.4, 1.6, 0.95};
  report::BaselineEntry failed;
  failed.ok = false;
  failed.message = "runtime_error: torch.compile of softmax.py failed: no lowering";
  report::BaselineEntry without_ratio;  // ok, but nothing to stand in for a compile
  auto plan = [&](BaselineKind kind, BaselineCacheMode mode,
                  const std::optional<report::BaselineEntry>& cached, const Task& t) {
    return plan_compile_baseline(kind, mode, t, cached).source;
  };
  EXPECT_EQ(plan(BaselineKind::eager, BaselineCacheMode::use, ok, task), Source::none);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::use, std::nullopt, task),
            Source::measure);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::use, ok, task), Source::cache);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::use, failed, task), Source::cache);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::use, without_ratio, task),
            Source::measure);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::refresh, ok, task), Source::measure);
  EXPECT_EQ(plan(BaselineKind::compile, BaselineCacheMode::off, ok, task), Source::measure);
  Task native = task;
  native.torch_reference = nullptr;
  const search::CompileBaselinePlan not_torch =
      plan_compile_baseline(BaselineKind::compile, BaselineCacheMode::use, native, std::nullopt);
  EXPECT_EQ(not_torch.source, Source::not_applicable);
  EXPECT_NE(not_torch.note.find("not a PyTorch module: --baseline compile does not apply"),
            std::string::npos);
  const auto cached_failure =
      plan_compile_baseline(BaselineKind::compile, BaselineCacheMode::use, task, failed);
  ASSERT_TRUE(cached_failure.cached);
  EXPECT_FALSE(cached_failure.cached->ok);
  EXPECT_EQ(cached_failure.cached->message, failed.message);
}

TEST_F(OptimizeBaselineTest, OnlyFreshMeasurementsAndFreshFailuresAreWritten) {
  search::OptimizeResult result = measured_run();
  EXPECT_TRUE(measured_baselines(result, "t").compile);
  // Measured at prepare() but no final rung (no correct candidate): no ratio, nothing written.
  result.compile_baseline->over_eager.reset();
  EXPECT_FALSE(measured_baselines(result, "t").compile);
  // A fresh failure is written, a failure read from the cache is not written again.
  result.compile_baseline = search::CompileBaselineResult{};
  result.compile_baseline->status = search::CompileBaselineStatus::failed;
  result.compile_baseline->message = "runtime_error: no lowering";
  const MeasuredBaselines failure = measured_baselines(result, "t");
  ASSERT_TRUE(failure.compile);
  EXPECT_FALSE(failure.compile->ok);
  EXPECT_EQ(failure.compile->message, "runtime_error: no lowering");
  EXPECT_FALSE(failure.eager);
  result.compile_baseline->cached = search::CachedCompileBaseline{};
  EXPECT_FALSE(measured_baselines(result, "t").compile);
  // --baseline-cache off writes nothing.
  std::ostringstream notes;
  record_baselines(BaselineCacheMode::off, torch_task(), h200(), (dir_ / "off").string(),
                   measured_run(), notes);
  EXPECT_FALSE(fs::exists(dir_ / "off"));
}

}  // namespace
}  // namespace kforge::cli

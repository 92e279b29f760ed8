// The reference check of an unserved task on an executor: when it starts, is followed again or
// is read back, and how each way it can end becomes the task's row. The real checks run in
// tests/cli_suite_torch_test.cpp (local) and tests/cli_suite_slurm_test.cpp (a local Slurm).
#include "cli/suite_reference_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;

const fs::path kTask = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";

// Records what the suite asks of it.
class RecordingExecutor final : public executor::Executor {
 public:
  std::size_t free_slots() override { return 1; }
  void start(const executor::TaskLaunch& launch) override {
    if (refuse) throw Error("sbatch refused it: invalid partition");
    started.push_back(launch);
  }
  std::vector<executor::TaskEnd> wait_any() override { return {}; }
  std::vector<executor::TaskEnd> cancel_all() override { return {}; }
  std::size_t in_flight() const override { return started.size(); }
  bool adopt_running(const executor::TaskLaunch& launch) override {
    adopted.push_back(launch);
    return still_running;
  }

  std::vector<executor::TaskLaunch> started, adopted;
  bool still_running = false;
  bool refuse = false;
};

class SuiteReferenceCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_suite_check_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "logs");
    setup_ = {"/opt/kforge", dir_, {"--backend", "cpu"}, 90.0, ""};
    row_.name = "t";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_report(const nlohmann::json& report) {
    fs::create_directories(dir_ / "checks");
    std::ofstream(reference_check_path(dir_, "t")) << report.dump();
  }
  bool start() {
    return start_reference_check(executor_, setup_, kTask, row_, [](const std::string&) {});
  }

  fs::path dir_;
  SuiteReferenceCheck setup_;
  RecordingExecutor executor_;
  report::SuiteRow row_;
};

TEST_F(SuiteReferenceCheckTest, TheCheckIsStartedOnTheExecutorAsAReferenceCheck) {
  write_report({{"ok", false}, {"error", "an earlier failure"}});  // run again, and removed
  EXPECT_TRUE(start());
  ASSERT_EQ(executor_.started.size(), 1u);
  const executor::TaskLaunch& launch = executor_.started[0];
  EXPECT_EQ(launch.kind, executor::TaskKind::reference_check);
  EXPECT_EQ(launch.argv, (std::vector<std::string>{"/opt/kforge", "task", kTask.string(),
                                                   "--check", "--report",
                                                   reference_check_path(dir_, "t").string(),
                                                   "--backend", "cpu"}));
  EXPECT_EQ(launch.log_path, dir_ / "logs" / "t.check.log");
  EXPECT_EQ(launch.timeout_s, 90.0);
  EXPECT_TRUE(launch.run_dir.empty());
  EXPECT_FALSE(fs::exists(reference_check_path(dir_, "t"))) << "a report there later is new";
}

TEST_F(SuiteReferenceCheckTest, AFinishedCheckOfTheSameTaskIsReadBackNotStarted) {
  write_report({{"ok", true},
                {"reference_ms", 1.5},
                {"wall_s", 4.0},
                {"task_hash", task_hash(load_task(kTask.string()))}});
  EXPECT_FALSE(start());
  EXPECT_TRUE(executor_.started.empty());
  EXPECT_TRUE(executor_.adopted.empty());
  EXPECT_EQ(row_.reference_check, "ran");
  EXPECT_EQ(*row_.reference_ms, 1.5);
  EXPECT_EQ(row_.wall_s, 4.0);
}

TEST_F(SuiteReferenceCheckTest, ACheckStillRunningFromAnEarlierSessionIsFollowedAgain) {
  executor_.still_running = true;
  EXPECT_TRUE(start());
  ASSERT_EQ(executor_.adopted.size(), 1u);
  EXPECT_EQ(executor_.adopted[0].kind, executor::TaskKind::reference_check);
  EXPECT_TRUE(executor_.started.empty());
}

TEST_F(SuiteReferenceCheckTest, ACheckTheExecutorRefusesIsTheTasksError) {
  executor_.refuse = true;
  row_.unserved = true;
  EXPECT_FALSE(start());
  EXPECT_FALSE(row_.unserved);
  EXPECT_EQ(row_.exit, "not started");
  EXPECT_NE(row_.failure.find("invalid partition"), std::string::npos) << row_.failure;
}

TEST_F(SuiteReferenceCheckTest, AReferenceThatRanGivesItsTime) {
  write_report({{"ok", true}, {"reference_ms", 2.25}});
  row_.unserved = true;
  executor::TaskEnd end;
  end.status = process::ExitStatus{true, 0, 0};
  end.wall_s = 7.0;
  finish_reference_check(setup_, end, row_);
  EXPECT_TRUE(row_.unserved);
  EXPECT_EQ(row_.reference_check, "ran");
  EXPECT_EQ(*row_.reference_ms, 2.25);
  EXPECT_EQ(row_.wall_s, 7.0);
}

TEST_F(SuiteReferenceCheckTest, EachWayACheckFailsIsTheTasksErrorSayingHow) {
  auto finish = [&](const executor::TaskEnd& end) {
    report::SuiteRow row;
    row.name = "t";
    row.unserved = true;
    finish_reference_check(setup_, end, row);
    EXPECT_FALSE(row.unserved);
    EXPECT_FALSE(row.reference_ms);
    return row;
  };
  executor::TaskEnd cancelled;
  cancelled.ended_by = "Slurm job 12 CANCELLED on n1";
  report::SuiteRow row = finish(cancelled);
  EXPECT_EQ(row.exit, "ended by the executor");
  EXPECT_NE(row.failure.find("its reference check: Slurm job 12 CANCELLED on n1"),
            std::string::npos)
      << row.failure;

  executor::TaskEnd timed_out;
  timed_out.timed_out = true;
  timed_out.ended_by = "Slurm job 13 TIMEOUT";
  row = finish(timed_out);
  EXPECT_EQ(row.exit, "timed out after 90 s");
  EXPECT_EQ(row.failure.rfind("Slurm job 13 TIMEOUT; its reference check was killed", 0), 0u)
      << row.failure;

  executor::TaskEnd stopped;
  stopped.stopped = true;
  EXPECT_EQ(finish(stopped).exit, "stopped");

  write_report({{"ok", false}, {"error", "workload 'problem' needs 90 GiB"}});
  executor::TaskEnd failed;
  failed.status = process::ExitStatus{true, 1, 0};
  row = finish(failed);
  EXPECT_EQ(row.exit, "reference check failed");
  EXPECT_EQ(row.failure, "its reference does not run: workload 'problem' needs 90 GiB");
}

}  // namespace
}  // namespace kforge::cli

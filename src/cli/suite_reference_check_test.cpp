// The reference checks of unserved tasks on an executor, in batches: what a batch runs, when a
// check is read back, and how each way it can end becomes its task's row. The real checks run in
// tests/cli_suite_torch_test.cpp (local) and tests/cli_suite_slurm_test.cpp (a local Slurm).
#include "cli/suite_reference_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/reference_check_batch.h"
#include "common/error.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;

const fs::path kTask = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";

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
    row_.unserved = true;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_report(const nlohmann::json& report, const std::string& label = "t") {
    fs::create_directories(dir_ / "checks");
    std::ofstream(reference_check_path(dir_, label)) << report.dump();
  }
  bool read_back() {
    return read_back_reference_check(setup_, kTask, row_, [](const std::string&) {});
  }
  report::SuiteRow unserved(const std::string& name) const {
    report::SuiteRow row;
    row.name = name;
    row.unserved = true;
    return row;
  }

  fs::path dir_;
  SuiteReferenceCheck setup_;
  report::SuiteRow row_;
};

TEST_F(SuiteReferenceCheckTest, ABatchChecksItsTasksInOneProcessAsAReferenceCheck) {
  write_report({{"ok", false}, {"error", "an earlier failure"}});  // run again, and removed
  const executor::TaskLaunch launch = reference_check_batch_launch(
      setup_, {{"t", kTask}, {"u", "relative/u.toml"}}, "checks-t");
  EXPECT_EQ(launch.kind, executor::TaskKind::reference_check);
  const fs::path batch_file = dir_ / "checks" / "checks-t.batch.json";
  EXPECT_EQ(launch.argv, (std::vector<std::string>{"/opt/kforge", "task", "--check-batch",
                                                   batch_file.string(), "--backend", "cpu"}));
  EXPECT_EQ(launch.label, "checks-t");
  EXPECT_EQ(launch.log_path, dir_ / "logs" / "checks-t.log");
  EXPECT_EQ(launch.timeout_s, 180.0) << "the task timeout per check";
  EXPECT_TRUE(launch.run_dir.empty());
  EXPECT_FALSE(fs::exists(reference_check_path(dir_, "t"))) << "a report there later is new";
  // The batch file names each task (absolute) and where its report goes.
  const std::vector<BatchCheck> checks = read_check_batch(batch_file.string());
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].label, "t");
  EXPECT_EQ(checks[0].task_file, kTask.string());
  EXPECT_EQ(checks[0].report_path, reference_check_path(dir_, "t").string());
  EXPECT_EQ(checks[1].task_file, fs::absolute("relative/u.toml").string());
}

TEST(SuiteReferenceCheckBatches, AreLargeOnOneSlotAndSmallerWhereSlotsRunSideBySide) {
  EXPECT_EQ(checks_per_batch(1), 64u);
  EXPECT_EQ(checks_per_batch(0), 64u);
  EXPECT_EQ(checks_per_batch(4), 16u);
  EXPECT_LT(checks_per_batch(2), checks_per_batch(1));
}

TEST_F(SuiteReferenceCheckTest, AFinishedCheckOfTheSameTaskIsReadBackNotRunAgain) {
  EXPECT_FALSE(read_back()) << "no report: it runs";
  write_report({{"ok", true},
                {"reference_ms", 1.5},
                {"wall_s", 4.0},
                {"task_hash", task_hash(load_task(kTask.string()))}});
  EXPECT_TRUE(read_back());
  EXPECT_EQ(row_.reference_check, "ran");
  EXPECT_EQ(*row_.reference_ms, 1.5);
  EXPECT_EQ(row_.wall_s, 4.0);
  report::SuiteRow edited;
  edited.name = "t";
  write_report({{"ok", true}, {"reference_ms", 1.5}, {"task_hash", "of another task"}});
  EXPECT_FALSE(read_back_reference_check(setup_, kTask, edited, [](const std::string&) {}));
}

TEST_F(SuiteReferenceCheckTest, EachRowOfABatchGetsItsOwnTimeAndAShareOfTheProcess) {
  write_report({{"ok", true}, {"reference_ms", 2.25}, {"wall_s", 3.0}}, "a");
  write_report({{"ok", true}, {"reference_ms", 0.5}, {"wall_s", 1.0}}, "b");
  report::SuiteRow a = unserved("a"), b = unserved("b");
  executor::TaskEnd end;
  end.label = "checks-a";
  end.status = process::ExitStatus{true, 0, 0};
  end.wall_s = 6.0;  // 2 s of process start and end besides the checks: 1 s each
  finish_reference_checks(setup_, end, {&a, &b});
  EXPECT_TRUE(a.unserved);
  EXPECT_EQ(a.reference_check, "ran");
  EXPECT_EQ(*a.reference_ms, 2.25);
  EXPECT_EQ(a.wall_s, 4.0);
  EXPECT_EQ(*b.reference_ms, 0.5);
  EXPECT_EQ(b.wall_s, 2.0);
}

TEST_F(SuiteReferenceCheckTest, EachWayACheckFailsIsTheTasksErrorSayingHow) {
  auto finish = [&](const executor::TaskEnd& end) {
    report::SuiteRow row = unserved("t");
    finish_reference_checks(setup_, end, {&row});
    EXPECT_FALSE(row.unserved);
    EXPECT_FALSE(row.reference_ms);
    return row;
  };
  executor::TaskEnd cancelled;
  cancelled.label = "checks-t";
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
  EXPECT_EQ(row.failure.rfind("Slurm job 13 TIMEOUT; its reference check's batch was killed", 0),
            0u)
      << row.failure;

  executor::TaskEnd stopped;
  stopped.stopped = true;
  EXPECT_EQ(finish(stopped).exit, "stopped");

  executor::TaskEnd crashed;  // the batch died before this task's report
  crashed.status = process::ExitStatus{false, 0, 11};
  crashed.last_error = "Segmentation fault";
  row = finish(crashed);
  EXPECT_EQ(row.exit, "reference check failed");
  EXPECT_NE(row.failure.find("batch ended before checking it: Segmentation fault"),
            std::string::npos)
      << row.failure;

  write_report({{"ok", false}, {"error", "workload 'problem' needs 90 GiB"}});
  executor::TaskEnd failed;
  failed.status = process::ExitStatus{true, 0, 0};
  row = finish(failed);
  EXPECT_EQ(row.exit, "reference check failed");
  EXPECT_EQ(row.failure, "its reference does not run: workload 'problem' needs 90 GiB");

  // A report that ran counts even when the batch timed out after writing it.
  write_report({{"ok", true}, {"reference_ms", 1.0}, {"wall_s", 1.0}});
  report::SuiteRow ran = unserved("t");
  finish_reference_checks(setup_, timed_out, {&ran});
  EXPECT_EQ(ran.reference_check, "ran");
  EXPECT_TRUE(ran.unserved);
}

// scancel (or the timeout) signals the batch's workers as well as its process, and a worker that
// dies first fails the check in flight before the batch itself goes (seen in CI under Slurm): that
// failed report is the ending's, while an earlier check's failure stays the reference's own.
TEST_F(SuiteReferenceCheckTest, ACheckCutByTheBatchsEndingIsTheEndingsRowNotTheReferences) {
  const std::string killed =
      "cannot start torch reference worker cpu:0: died during hello (killed by signal 15)";
  write_report({{"ok", false}, {"error", "Model.forward raised"}, {"wall_s", 1.0}}, "a");
  write_report({{"ok", false}, {"error", killed}, {"wall_s", 0.5}}, "b");
  report::SuiteRow a = unserved("a"), b = unserved("b"), c = unserved("c");
  executor::TaskEnd cancelled;
  cancelled.label = "checks-a";
  cancelled.ended_by = "Slurm job 12 CANCELLED on n1";
  finish_reference_checks(setup_, cancelled, {&a, &b, &c});
  EXPECT_EQ(a.exit, "reference check failed") << "a failure before the ending is the reference's";
  EXPECT_EQ(a.failure, "its reference does not run: Model.forward raised");
  EXPECT_EQ(b.exit, "ended by the executor") << b.failure;
  EXPECT_NE(b.failure.find("Slurm job 12 CANCELLED"), std::string::npos) << b.failure;
  EXPECT_NE(b.failure.find("as it was ended, the check reported: " + killed), std::string::npos)
      << b.failure;
  EXPECT_EQ(c.exit, "ended by the executor") << "never started";

  // A check that had started (its marker) and wrote nothing else was the one in flight; the
  // failed report before it is that earlier check's own.
  write_report({{"ok", false}, {"in_progress", true}, {"task_file", "c.toml"}}, "c");
  report::SuiteRow a2 = unserved("a"), b2 = unserved("b"), c2 = unserved("c");
  executor::TaskEnd timed_out;
  timed_out.timed_out = true;
  finish_reference_checks(setup_, timed_out, {&a2, &b2, &c2});
  EXPECT_EQ(b2.exit, "reference check failed") << b2.failure;
  EXPECT_EQ(c2.exit, "timed out after 270 s") << c2.failure;
  EXPECT_EQ(c2.failure.find("as it was ended"), std::string::npos) << c2.failure;

  // A batch that ended on its own: every failed report is the reference's.
  report::SuiteRow b3 = unserved("b");
  executor::TaskEnd exited;
  exited.status = process::ExitStatus{true, 0, 0};
  fs::remove(reference_check_path(dir_, "c"));
  finish_reference_checks(setup_, exited, {&b3});
  EXPECT_EQ(b3.exit, "reference check failed");
}

}  // namespace
}  // namespace kforge::cli

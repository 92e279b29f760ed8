// The suite driver against a fake executor: tasks that end out of order land in task order,
// a task the executor (Slurm) ended becomes its row with the executor's reason, and no more
// tasks are started than the executor has slots for.
#include "cli/suite_executor.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "executor/executor.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;

// Two slots; ends the most recently started task first, as a cluster may.
class OutOfOrderExecutor final : public executor::Executor {
 public:
  explicit OutOfOrderExecutor(int* most_in_flight) : most_in_flight_(most_in_flight) {}
  std::size_t free_slots() override { return 2 - running_.size(); }
  void start(const executor::TaskLaunch& launch) override {
    running_.push_back(launch);
    *most_in_flight_ = std::max<int>(*most_in_flight_, static_cast<int>(running_.size()));
  }
  std::vector<executor::TaskEnd> wait_any() override {
    executor::TaskLaunch last = running_.back();
    running_.pop_back();
    executor::TaskEnd end;
    end.label = last.label;
    if (last.label == "b") {
      end.ended_by = "Slurm job 7 NODE_FAIL on n3";
    } else {
      end.status = process::ExitStatus{true, 3, 0};  // ran, found no correct candidate
    }
    return {end};
  }
  std::vector<executor::TaskEnd> cancel_all() override { return {}; }
  std::size_t in_flight() const override { return running_.size(); }

 private:
  std::vector<executor::TaskLaunch> running_;
  int* most_in_flight_;
};

// The part of `kforge optimize`'s option table the suite checks its arguments against.
void add_small_optimize(CLI::App& app, OptimizeCommandOptions& options) {
  CLI::App* optimize = app.add_subcommand("optimize");
  optimize->add_option("task", options.task_path);
  optimize->add_option("--steps", options.search.steps);
}

TEST(SuiteOnAnExecutor, RowsLandInTaskOrderAndAnExecutorEndIsTheRowsReason) {
  char pattern[] = "/tmp/kforge_suite_executor_XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  for (const char* label : {"a", "b", "c"}) {
    fs::create_directories(dir / "tasks" / label);
    std::ofstream(dir / "tasks" / label / "task.toml") << "name = \"x\"\n";
  }
  SuiteCommandOptions options;
  options.inputs = {(dir / "tasks").string()};
  options.suite_dir = (dir / "suite").string();
  int most_in_flight = 0;
  const int exit_code =
      run_suite(options, add_small_optimize, std::make_unique<OutOfOrderExecutor>(&most_in_flight));
  EXPECT_EQ(exit_code, 1) << "b's row is an error";
  EXPECT_EQ(most_in_flight, 2);
  const nlohmann::json rows =
      nlohmann::json::parse(read_file(dir / "suite" / "suite.json"))["tasks"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["name"], "a");
  EXPECT_EQ(rows[1]["name"], "b");
  EXPECT_EQ(rows[2]["name"], "c");
  EXPECT_EQ(rows[1]["failure"], "Slurm job 7 NODE_FAIL on n3");
  EXPECT_EQ(rows[1]["exit"], "ended by the executor");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kforge::cli

// End-to-end tests of `kforge suite` as a user runs it: the real kforge binary runs each task's
// optimize as its own child process, on the cpu backend, over a small folder of tasks with one
// broken task among them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/files.h"
#include "process/subprocess.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliSuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_suite_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs kforge with `args`; the memory and the artifact cache live in the test's folder (the
  // suite's children inherit the environment).
  process::CommandResult kforge(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env", "KFORGE_MEMORY=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     KFORGE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }

  // A copy of tests/data/softmax_small under tasks/<label>/, its references pointing at the
  // originals.
  void add_task(const std::string& label) {
    fs::path from = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";
    std::string text = read_file(from);
    text = std::regex_replace(text, std::regex(R"re(= "([^"]*\.(cpp|cu))")re"),
                              "= \"" + from.parent_path().string() + "/$1\"");
    fs::create_directories(dir_ / "tasks" / label);
    std::ofstream(dir_ / "tasks" / label / "task.toml") << text;
  }

  // A task whose input has a dtype kforge does not know: its optimize fails at once.
  void add_broken_task(const std::string& label) {
    fs::create_directories(dir_ / "tasks" / label);
    std::ofstream(dir_ / "tasks" / label / "task.toml")
        << "name = \"broken\"\nfamily = \"softmax\"\n[[inputs]]\nname = \"x\"\n"
           "dtype = \"float32\"\nshape = [\"n\"]\n";
  }

  std::vector<std::string> fast_options() {
    return {"--backend", "cpu", "--steps", "1", "--proposals", "1", "--final-rounds", "2"};
  }

  nlohmann::json suite_json(const fs::path& suite) {
    return nlohmann::json::parse(read_file(suite / "suite.json"));
  }

  fs::path dir_;
};

TEST_F(CliSuiteTest, SuiteOnCpuReportsFastPAndTheBrokenTaskAsAnError) {
  add_task("softmax_small");
  add_task("softmax_again");
  add_broken_task("broken");
  fs::path suite = dir_ / "suite";
  std::vector<std::string> args = {"suite", (dir_ / "tasks").string(), "--suite-dir",
                                   suite.string()};
  for (const std::string& option : fast_options()) args.push_back(option);
  process::CommandResult result = kforge(args);
  // A task whose run errored fails the suite, and is reported as an error naming the task file
  // and the parse problem, not as a task without a correct candidate.
  ASSERT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("kforge: error: suite: 1 of 3 tasks errored: broken"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("[1/3] broken: error: " +
                               (dir_ / "tasks" / "broken" / "task.toml").string() +
                               ": inputs[0].dtype"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("not correct:"), std::string::npos) << result.output;
  // The table: three tasks, two correct; fast_0 is the correctness rate.
  EXPECT_NE(result.output.find("| 3 | 66.7% (2) | 66.7% |"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("geomean speedup"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("Errors (the run did not finish; counted as not correct):\n"
                               "- broken (exit code 1): "),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("Not correct:"), std::string::npos) << result.output;

  nlohmann::json json = suite_json(suite);
  ASSERT_EQ(json["tasks"].size(), 3u) << json.dump(2);
  // Sorted by folder: broken, softmax_again, softmax_small.
  const nlohmann::json& broken = json["tasks"][0];
  EXPECT_EQ(broken["name"], "broken");
  EXPECT_FALSE(broken["completed"].get<bool>());
  EXPECT_FALSE(broken["correct"].get<bool>());
  EXPECT_EQ(broken["status"], "error");
  EXPECT_NE(broken["failure"].get<std::string>().find("inputs[0].dtype"), std::string::npos)
      << broken.dump(2);
  for (int i : {1, 2}) {
    const nlohmann::json& row = json["tasks"][i];
    EXPECT_TRUE(row["correct"].get<bool>()) << row.dump(2);
    EXPECT_GT(row["speedup"]["speedup"].get<double>(), 0.0);
    EXPECT_TRUE(fs::exists(fs::path(row["run_dir"].get<std::string>()) / "result.json"));
  }
  EXPECT_EQ(json["aggregate"]["correct"], 2);
  EXPECT_EQ(json["aggregate"]["fast_p"][0]["count"], 2);
  EXPECT_FALSE(json["aggregate"]["geomean_speedup"].is_null());
  EXPECT_EQ(json["optimize_args"], nlohmann::json(fast_options()));
  EXPECT_TRUE(fs::exists(suite / "suite.md"));
  EXPECT_TRUE(fs::exists(suite / "logs" / "broken.log"));

  // Continue the same suite: finished tasks are kept; an unfinished run directory (here one
  // left for the broken task, as if killed) is moved aside, never deleted, and run again.
  fs::create_directories(suite / "broken");
  std::ofstream(suite / "broken" / "run.json")
      << nlohmann::json({{"task_path", (dir_ / "tasks" / "broken" / "task.toml").string()}});
  process::CommandResult again = kforge(args);
  ASSERT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("softmax_again: already complete"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("softmax_small: already complete"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("broken is unfinished; moved to"), std::string::npos) << again.output;
  EXPECT_TRUE(fs::exists(suite / ".incomplete" / "broken" / "run.json"));
  json = suite_json(suite);
  ASSERT_EQ(json["tasks"].size(), 3u);
  EXPECT_FALSE(json["tasks"][0]["resumed"].get<bool>());
  EXPECT_TRUE(json["tasks"][1]["resumed"].get<bool>());
  EXPECT_TRUE(json["tasks"][2]["resumed"].get<bool>());
  EXPECT_EQ(json["aggregate"]["correct"], 2);
  EXPECT_NE(again.output.find("| 3 | 66.7% (2) | 66.7% |"), std::string::npos) << again.output;
}

TEST_F(CliSuiteTest, TaskPastItsTimeoutIsKilledAndCountsAsIncorrect) {
  add_task("softmax_small");
  fs::path suite = dir_ / "suite";
  std::vector<std::string> args = {"suite",        (dir_ / "tasks").string(), "--suite-dir",
                                   suite.string(), "--task-timeout-s",        "0.3",
                                   "--json"};
  for (const std::string& option : fast_options()) args.push_back(option);
  process::CommandResult result = kforge(args);
  ASSERT_EQ(result.exit_code, 1) << result.output;
  nlohmann::json json = suite_json(suite);
  ASSERT_EQ(json["tasks"].size(), 1u);
  EXPECT_EQ(json["tasks"][0]["status"], "error");
  EXPECT_FALSE(json["tasks"][0]["correct"].get<bool>());
  EXPECT_EQ(json["tasks"][0]["exit"], "timed out after 0.3 s");
  EXPECT_EQ(json["aggregate"]["correct_fraction"], 0.0);
  EXPECT_TRUE(json["aggregate"]["geomean_speedup"].is_null());
}

TEST_F(CliSuiteTest, ATaskWithoutACorrectCandidateFailsTheSuiteWithItsOwnCode) {
  // A finished run that found no correct candidate, left by an earlier suite run: it is kept,
  // reported as not correct (not as an error), and the suite exits 3.
  add_task("softmax_small");
  fs::path suite = dir_ / "suite";
  fs::create_directories(suite / "softmax_small");
  std::ofstream(suite / "softmax_small" / "run.json") << nlohmann::json(
      {{"task_path", (dir_ / "tasks" / "softmax_small" / "task.toml").string()}});
  std::ofstream(suite / "softmax_small" / "result.json")
      << nlohmann::json({{"task", "softmax_small"},
                         {"candidates", {{{"verdict", "wrong_answer"}}}},
                         {"best", nullptr}});
  process::CommandResult result =
      kforge({"suite", (dir_ / "tasks").string(), "--suite-dir", suite.string()});
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("1 of 1 tasks found no correct candidate: softmax_small"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Not correct:\n- softmax_small: no candidate passed"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(suite_json(suite)["tasks"][0]["status"], "not correct");
}

TEST_F(CliSuiteTest, BadInputIsRefusedBeforeAnyTaskRuns) {
  fs::create_directories(dir_ / "empty");
  process::CommandResult empty = kforge({"suite", (dir_ / "empty").string()});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.output.find("no task.toml or PyTorch problem file below this folder"), std::string::npos) << empty.output;

  add_task("softmax_small");
  fs::path suite = dir_ / "suite";
  for (const char* timeout : {"0", "-5"}) {
    process::CommandResult refused = kforge({"suite", (dir_ / "tasks").string(), "--suite-dir",
                                             suite.string(), "--task-timeout-s", timeout});
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("--task-timeout-s"), std::string::npos) << refused.output;
  }
  process::CommandResult bad_steps =
      kforge({"suite", (dir_ / "tasks").string(), "--suite-dir", suite.string(), "--steps", "-1"});
  EXPECT_EQ(bad_steps.exit_code, 2) << bad_steps.output;  // a bad command line, as in optimize
  EXPECT_NE(bad_steps.output.find("--steps: expected a whole number from 0 to 100000, got '-1'"),
            std::string::npos)
      << bad_steps.output;
  EXPECT_FALSE(fs::exists(suite)) << "nothing is written for refused input";
}

}  // namespace
}  // namespace kforge

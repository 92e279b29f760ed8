// `kforge verify RUN_DIR` as a reviewer runs it (cpu backend): a finished run is re-checked from
// what it carries, also after its task's own folder is gone and the run has moved.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/verify_command.h"
#include "common/files.h"
#include "process/subprocess.h"
#include "support/cli_case.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// One folder per test process: ctest runs each test of this suite in its own process, at the
// same time as the others, and each makes its own run there.
fs::path suite_root() {
  return fs::temp_directory_path() / ("kforge_cli_verify_" + std::to_string(::getpid()));
}

process::CommandResult kforge(const fs::path& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"env", "KFORGE_CACHE_DIR=" + (dir / "cache").string(),
                                   "KFORGE_MEMORY_DB=" + (dir / "memory.sqlite").string(),
                                   KFORGE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return process::run_command(argv, 600);
}

class CliVerifyTest : public ::testing::Test {
 protected:
  // One finished run for every test: its task is a copy that is deleted afterwards, and the run
  // is moved, as when a run directory is sent to another machine.
  static void SetUpTestSuite() {
    fs::remove_all(suite_root());
    const fs::path task_dir = suite_root() / "task";
    fs::create_directories(task_dir);
    const fs::path data = fs::path(KFORGE_SOURCE_DIR) / "tests" / "data" / "softmax_small";
    std::string toml = read_file(data / "task.toml");
    for (const char* ext : {".cpp", ".cu"}) {
      const std::string from = std::string("../../../examples/softmax/reference") + ext;
      toml.replace(toml.find(from), from.size(), std::string("reference") + ext);
      fs::copy_file(fs::path(KFORGE_SOURCE_DIR) / "examples" / "softmax" / ("reference" + std::string(ext)),
                    task_dir / ("reference" + std::string(ext)));
    }
    std::ofstream(task_dir / "task.toml") << toml;
    optimize_ = kforge(suite_root(), {"optimize", (task_dir / "task.toml").string(), "--backend",
                                      "cpu", "--steps", "1", "--proposals", "1", "--final-rounds",
                                      "2", "--run-dir", (suite_root() / "run").string()});
    fs::remove_all(task_dir);
    fs::rename(suite_root() / "run", suite_root() / "moved-run");
  }
  static void TearDownTestSuite() { fs::remove_all(suite_root()); }

  void SetUp() override {
    ASSERT_EQ(optimize_.exit_code, 0) << optimize_.output;
    dir_ = suite_root() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(suite_root() / "moved-run", dir_ / "run", fs::copy_options::recursive);
  }

  process::CommandResult verify(std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"verify", (dir_ / "run").string(), "--final-rounds", "2"};
    args.insert(args.end(), more.begin(), more.end());
    return kforge(dir_, args);
  }

  static process::CommandResult optimize_;
  fs::path dir_;
};

process::CommandResult CliVerifyTest::optimize_;

TEST_F(CliVerifyTest, AMovedRunIsRecheckedFromItsBundleOnFreshSeeds) {
  process::CommandResult result = verify({"--json", "--seed", "42"});
  const nlohmann::json j = testing::json_in(result.output);
  ASSERT_TRUE(j.is_object()) << result.output;
  // Timing on a shared machine may land either side; the best itself must be correct here.
  const std::string verdict = j["verdict"];
  EXPECT_TRUE(verdict == "reproduced" || verdict == "faster_here" || verdict == "slower_here")
      << j.dump(2);
  EXPECT_EQ(result.exit_code, verdict == "slower_here" ? 3 : 0) << result.output;
  EXPECT_TRUE(j["here"]["correct"].get<bool>()) << j.dump(2);
  EXPECT_EQ(j["seed"], 42u);
  EXPECT_EQ(j["recorded"]["task"], "softmax_small");
  EXPECT_EQ(j["here"]["reference"]["reference"], (dir_ / "run" / "bundle" / "reference.cpp").string());
  EXPECT_GT(j["recorded"]["speedup"].get<double>(), 0.0);
}

TEST_F(CliVerifyTest, ABestThatIsWrongHereFails) {
  const fs::path best = dir_ / "run" / "best.cpp";
  std::string text = read_file(best);
  // The built-in kernel's entry point, renamed and wrapped: it zeroes the output's first element
  // after the real kernel ran, a wrong answer on every input.
  const size_t entry = text.find("KFORGE_API int kforge_run(");
  ASSERT_NE(entry, std::string::npos) << text;
  text.replace(entry, 26, "static int real_run(");
  text += "\nKFORGE_API int kforge_run(const kforge_args* args) {\n"
          "  const int status = real_run(args);\n"
          "  static_cast<float*>(args->outputs[0].data)[0] = 0.0f;\n"
          "  return status;\n}\n";
  std::ofstream(best) << text;
  process::CommandResult result = verify();
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("verdict: failed: the best is not correct here: wrong_answer"),
            std::string::npos)
      << result.output;
}

TEST_F(CliVerifyTest, RunsThatCannotBeVerifiedAreRefusedSayingWhy) {
  process::CommandResult result = kforge(dir_, {"verify", (dir_ / "nothing").string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("not a kforge run directory"), std::string::npos) << result.output;

  nlohmann::json run = nlohmann::json::parse(read_file(dir_ / "run" / "run.json"));
  run["kforge_version"] = "99.0.0";
  std::ofstream(dir_ / "run" / "run.json") << run.dump();
  result = verify();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("made by kforge 99.0.0, newer than this kforge"), std::string::npos)
      << result.output;

  fs::copy(suite_root() / "moved-run" / "run.json", dir_ / "run" / "run.json",
           fs::copy_options::overwrite_existing);
  nlohmann::json outcome = nlohmann::json::parse(read_file(dir_ / "run" / "result.json"));
  outcome["best"] = nullptr;
  std::ofstream(dir_ / "run" / "result.json") << outcome.dump();
  result = verify();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("found no correct candidate; there is no claim to verify"),
            std::string::npos)
      << result.output;

  fs::remove(dir_ / "run" / "result.json");
  result = verify();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("the run did not finish (no result.json)"), std::string::npos)
      << result.output;
}

TEST(JudgeVerification, OverlappingIntervalsReproduceAndDisjointOnesSayWhichWay) {
  cli::RecordedClaim recorded;
  recorded.speedup = 2.0;
  recorded.ci_low = 1.9;
  recorded.ci_high = 2.1;
  cli::KernelEvaluation here;
  here.speedup = {2.05, 2.0, 2.2, 0.95};
  EXPECT_EQ(cli::judge_verification(recorded, here).first, "reproduced");
  here.speedup = {2.5, 2.3, 2.7, 0.95};
  EXPECT_EQ(cli::judge_verification(recorded, here).first, "faster_here");
  here.speedup = {1.5, 1.4, 1.6, 0.95};
  const auto [verdict, why] = cli::judge_verification(recorded, here);
  EXPECT_EQ(verdict, "slower_here");
  EXPECT_NE(why.find("1.500x [1.400, 1.600] here against 2.000x [1.900, 2.100] recorded"),
            std::string::npos)
      << why;
  here.verdict = Verdict::wrong_answer;
  here.failed_at = "rungs 0-1";
  here.message = "output 'y' differs";
  EXPECT_EQ(cli::judge_verification(recorded, here).first, "failed");
}

}  // namespace
}  // namespace kforge

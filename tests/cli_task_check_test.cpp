// `kforge task FILE --check` as a user runs it (cpu backend): the reference of a PyTorch problem
// or of a native task is run as `kforge optimize` runs it before its search, and what it found
// (or why it does not run) is printed and, with --report, written as JSON.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process/subprocess.h"
#include "support/cli_case.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliTaskCheckTest : public testing::CliCase {
 protected:
  CliTaskCheckTest() : CliCase("kforge_cli_task_check_") {}

  static nlohmann::json read_json(const fs::path& path) {
    return nlohmann::json::parse(std::ifstream(path));
  }
};

TEST_F(CliTaskCheckTest, RunsTheReferenceOfAProblemNoFamilyServesWithItsScalarArgument) {
  const fs::path problem = write("scale.py", testing::kScaleByScalarProblem);
  const fs::path report = dir_ / "check.json";
  process::CommandResult result = kforge({"task", problem.string(), "--check", "--backend", "cpu",
                                          "--json", "--report", report.string()});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json written = read_json(report);
  EXPECT_TRUE(written["ok"].get<bool>()) << written.dump(2);
  EXPECT_EQ(written["backend"], "cpu");
  EXPECT_EQ(written["timed_workload"], "problem");
  EXPECT_GT(written["reference_ms"].get<double>(), 0.0);
  EXPECT_FALSE(written["samples_ms"].empty());
  EXPECT_TRUE(written["self_test"]["passes"].get<bool>());
  EXPECT_FALSE(written["self_test"]["cases"].empty());
  EXPECT_TRUE(written["compile"].is_null());
  EXPECT_EQ(written["reference"], problem.string());
  // --json prints the same report (the console's other lines go to stderr).
  EXPECT_EQ(testing::json_in(result.output)["task_hash"], written["task_hash"]) << result.output;
}

TEST_F(CliTaskCheckTest, ChecksANativeTasksCompiledReference) {
  const fs::path task = fs::path(KFORGE_SOURCE_DIR) / "tests" / "data" / "softmax_small" / "task.toml";
  process::CommandResult result = kforge({"task", task.string(), "--check", "--backend", "cpu"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("reference of 'softmax_small'"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("on 'timed': "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("self-test: the reference passes against itself on 5 gate input(s)"),
            std::string::npos)
      << result.output;
  // torch.compile has nothing to compile in a native reference: said, not an error.
  result = kforge({"task", task.string(), "--check", "--backend", "cpu", "--baseline", "compile"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("--baseline compile applies to PyTorch references only"),
            std::string::npos)
      << result.output;
}

TEST_F(CliTaskCheckTest, AReferenceThatCannotRunFailsNamingTheProblemAndWritesWhy) {
  const fs::path problem = write("too_large.py", testing::kTooLargeProblem);
  const fs::path report = dir_ / "check.json";
  process::CommandResult result = kforge(
      {"task", problem.string(), "--check", "--backend", "cpu", "--report", report.string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("kforge: error: "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("too_large.py"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("workload 'problem' needs"), std::string::npos) << result.output;
  const nlohmann::json written = read_json(report);
  EXPECT_FALSE(written["ok"].get<bool>());
  EXPECT_NE(written["error"].get<std::string>().find("workload 'problem' needs"), std::string::npos)
      << written.dump(2);
}

TEST_F(CliTaskCheckTest, CheckAndOutputAreExclusive) {
  const fs::path problem = write("scale.py", testing::kScaleByScalarProblem);
  process::CommandResult result =
      kforge({"task", problem.string(), "--check", "-o", (dir_ / "t.toml").string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("--check and -o: choose one"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "t.toml"));
}

}  // namespace
}  // namespace kforge

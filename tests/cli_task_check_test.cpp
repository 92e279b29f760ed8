// `kforge task FILE --check` as a user runs it (cpu backend): the reference of a PyTorch problem
// or of a native task is run as `kforge optimize` runs it before its search, and what it found
// (or why it does not run) is printed and, with --report, written as JSON; `kforge task
// --check-batch LIST` does it for many tasks on one set of workers.
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

TEST_F(CliTaskCheckTest, ABatchChecksEachTaskOnWorkersStartedOnceAndGoesOnPastAFailure) {
  const fs::path scale = write("scale.py", testing::kScaleByScalarProblem);
  const fs::path too_large = write("too_large.py", testing::kTooLargeProblem);
  const fs::path native =
      fs::path(KFORGE_SOURCE_DIR) / "tests" / "data" / "softmax_small" / "task.toml";
  const fs::path batch = write("batch.json", nlohmann::json{{"checks", {
      {{"label", "scale"}, {"task", scale.string()}, {"report", "r/scale.json"}},
      {{"label", "too_large"}, {"task", too_large.string()}, {"report", "r/too_large.json"}},
      {{"label", "native"}, {"task", native.string()}, {"report", "r/native.json"}},
      {{"label", "scale_again"}, {"task", scale.string()}, {"report", "r/again.json"}}}}}.dump());
  process::CommandResult result =
      kforge({"task", "--check-batch", batch.string(), "--backend", "cpu"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[2/4] too_large: error: "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("3 of 4 reference(s) ran"), std::string::npos) << result.output;
  const nlohmann::json first = read_json(dir_ / "r" / "scale.json");
  const nlohmann::json failed = read_json(dir_ / "r" / "too_large.json");
  const nlohmann::json native_check = read_json(dir_ / "r" / "native.json");
  const nlohmann::json again = read_json(dir_ / "r" / "again.json");
  EXPECT_TRUE(first["ok"].get<bool>()) << first.dump(2);
  EXPECT_FALSE(failed["ok"].get<bool>());
  EXPECT_NE(failed["error"].get<std::string>().find("workload 'problem' needs"), std::string::npos)
      << failed.dump(2);
  EXPECT_TRUE(native_check["ok"].get<bool>()) << native_check.dump(2);
  EXPECT_EQ(native_check["task"], "softmax_small");
  ASSERT_TRUE(again["ok"].get<bool>()) << again.dump(2);
  EXPECT_EQ(again["task_hash"], first["task_hash"]);
  EXPECT_EQ(again["batch"]["index"], 3);
  EXPECT_EQ(again["batch"]["size"], 4);
  // The torch reference worker started for the first check (import torch) and served the last
  // one as it was: the last check waited for no worker to start.
  EXPECT_GT(first["phases"]["workers"].get<double>(), 0.1) << first.dump(2);
  EXPECT_LT(again["phases"]["workers"].get<double>(), 0.05) << again.dump(2);
  EXPECT_GE(again["wall_s"].get<double>(), 0.0);
}

TEST_F(CliTaskCheckTest, AMalformedBatchFileIsRefusedNamingIt) {
  auto refused = [&](const std::string& text, const std::string& expected) {
    const fs::path batch = write("bad.json", text);
    process::CommandResult result =
        kforge({"task", "--check-batch", batch.string(), "--backend", "cpu"});
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find(batch.string()), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << result.output;
  };
  refused("{not json", "not a check batch");
  refused("{\"checks\": []}", "at least one check");
  refused("{\"checks\": [{\"label\": \"a\", \"task\": \"t.toml\"}]}",
          "checks[0]: field 'report' must be a non-empty string");
  refused("{\"checks\": [{\"label\": \"a\", \"task\": \"t\", \"report\": \"r.json\"}, "
          "{\"label\": \"b\", \"task\": \"u\", \"report\": \"r.json\"}]}",
          "is named by an earlier check too");
  const fs::path problem = write("scale.py", testing::kScaleByScalarProblem);
  process::CommandResult both =
      kforge({"task", problem.string(), "--check-batch", (dir_ / "bad.json").string()});
  EXPECT_EQ(both.exit_code, 1) << both.output;
  EXPECT_NE(both.output.find("--check-batch takes no FILE"), std::string::npos) << both.output;
  process::CommandResult neither = kforge({"task"});
  EXPECT_EQ(neither.exit_code, 1) << neither.output;
  EXPECT_NE(neither.output.find("expected a file"), std::string::npos) << neither.output;
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

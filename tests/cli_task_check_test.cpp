// `kforge task FILE --check` as a user runs it (cpu backend): the reference of a PyTorch problem
// or of a native task is run as `kforge optimize` runs it before its search, and what it found
// (or why it does not run) is printed and, with --report, written as JSON.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process/subprocess.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// forward(A, s): a scalar argument after the tensor, as in KernelBench 5. No built-in family
// computes it; its reference must still run, with s given.
constexpr const char* kScaleByScalar = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        return A * s


M = 300
N = 40


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
)";

// Derives at its small sizes; its own sizes need terabytes.
constexpr const char* kTooLarge = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


rows = 1 << 20
cols = 1 << 20


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
)";

class CliTaskCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_task_check_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  process::CommandResult kforge(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env", "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     std::string("KFORGE_PYTHON=") + KFORGE_TEST_PYTHON};
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }

  static nlohmann::json read_json(const fs::path& path) {
    return nlohmann::json::parse(std::ifstream(path));
  }

  fs::path dir_;
};

TEST_F(CliTaskCheckTest, RunsTheReferenceOfAProblemNoFamilyServesWithItsScalarArgument) {
  const fs::path problem = write("scale.py", kScaleByScalar);
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
  const size_t brace = result.output.find("{\n");
  ASSERT_NE(brace, std::string::npos) << result.output;
  EXPECT_EQ(nlohmann::json::parse(result.output.substr(brace))["task_hash"], written["task_hash"]);
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
  const fs::path problem = write("too_large.py", kTooLarge);
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
  const fs::path problem = write("scale.py", kScaleByScalar);
  process::CommandResult result =
      kforge({"task", problem.string(), "--check", "-o", (dir_ / "t.toml").string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("--check and -o: choose one"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "t.toml"));
}

}  // namespace
}  // namespace kforge

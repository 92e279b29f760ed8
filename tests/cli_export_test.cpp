// `kforge export RUN_DIR --format kernelbench` and the solution.py `kforge optimize PROBLEM.py`
// writes (report/solution_export.h): what a user runs, through the binary. The solution's
// numbers are checked by python/tests/test_solution_build.py (ctest python.solution_build).
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "support/test_python.h"
#include "process/subprocess.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

constexpr const char* kRelu = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of a 2-d input."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 4000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
)";

std::string read(const fs::path& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

class CliExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_export_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "run");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / "run" / name) << text;
  }

  process::CommandResult kforge(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env", "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "KFORGE_PYTHON=" + kforge::testing::test_python()};
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }

  process::CommandResult export_run() {
    return kforge({"export", (dir_ / "run").string(), "--format", "kernelbench"});
  }

  fs::path dir_;
};

TEST_F(CliExportTest, RefusesARunOfANativeTask) {
  write("run.json", R"({"backend": "cpu"})");
  write("result.json", R"({"best": {"id": "a", "source": "best.cpp"}})");
  const process::CommandResult result = export_run();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("not a PyTorch problem's run (no reference.torch.json)"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "solution.py"));
}

TEST_F(CliExportTest, RefusesAnUnfinishedRun) {
  write("reference.torch.json", "{}");
  write("run.json", R"({"backend": "cpu"})");
  const process::CommandResult result = export_run();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("result.json: missing: the run has not finished"), std::string::npos)
      << result.output;
}

TEST_F(CliExportTest, RefusesARunWithoutABestKernel) {
  write("reference.torch.json", "{}");
  write("run.json", R"({"backend": "cpu"})");
  write("result.json", R"({"best": null})");
  const process::CommandResult result = export_run();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("the run has no best kernel"), std::string::npos) << result.output;
}

TEST_F(CliExportTest, FormatIsRequiredAndChecked) {
  process::CommandResult result = kforge({"export", (dir_ / "run").string()});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--format"), std::string::npos) << result.output;
  result = kforge({"export", (dir_ / "run").string(), "--format", "onnx"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

TEST_F(CliExportTest, OptimizeOfAProblemWritesSolutionAndExportWritesTheSame) {
  std::ofstream(dir_ / "relu_2d.py") << kRelu;
  const fs::path run = dir_ / "optimized";
  process::CommandResult result =
      kforge({"optimize", (dir_ / "relu_2d.py").string(), "--backend", "cpu", "--steps", "0",
              "--max-candidates", "1", "--final-rounds", "2", "--run-dir", run.string()});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("solution:   " + (run / "solution.py").string()), std::string::npos)
      << result.output;
  const std::string written = read(run / "solution.py");
  EXPECT_NE(written.find("class ModelNew(nn.Module):"), std::string::npos);
  EXPECT_NE(written.find("load_inline("), std::string::npos);
  const fs::path other = dir_ / "exported.py";
  result = kforge({"export", run.string(), "--format", "kernelbench", "-o", other.string()});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(read(other), written);
}

}  // namespace
}  // namespace kforge

// `kforge eval TASK KERNEL` as a user runs it (cpu backend): one kernel of the user's own through
// kforge's trusted plane without a search; a kernel that fails a rung is a verdict (exit 3), a
// file that cannot be evaluated an error (exit 1).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "process/subprocess.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// forward(A, s) = A * s, with s after the tensor: no built-in family; a native kernel of it gets
// s as its one scalar.
constexpr const char* kScale = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        return A * s


M = 257
N = 33


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
)";

constexpr const char* kScaleKernel = R"(#include <kforge/kernel.h>

#include <cstdint>

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& a = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  int64_t n = 1;
  for (int i = 0; i < a.ndim; ++i) n *= a.shape[i];
  const float* ap = static_cast<const float*>(a.data);
  float* yp = static_cast<float*>(y.data);
  const float s = static_cast<float>(args->scalars[0]);
  for (int64_t i = 0; i < n; ++i) yp[i] = ap[i] * s;
  return 0;
}
)";

class CliEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_eval_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  // examples/softmax/reference.cpp with `from` replaced by `to`.
  fs::path softmax_variant(const std::string& name, const std::string& from, const std::string& to) {
    std::string text = read_file(fs::path(KFORGE_SOURCE_DIR) / "examples/softmax/reference.cpp");
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return write(name, text);
  }

  process::CommandResult eval(const fs::path& task, const fs::path& kernel,
                              std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {"env", "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                     std::string("KFORGE_PYTHON=") + KFORGE_TEST_PYTHON,
                                     KFORGE_CLI_PATH, "eval", task.string(), kernel.string(),
                                     "--backend", "cpu", "--final-rounds", "2"};
    argv.insert(argv.end(), more.begin(), more.end());
    return process::run_command(argv, 600);
  }

  static nlohmann::json json_of(const std::string& output) {
    const size_t brace = output.find("{\n");
    return brace == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output.substr(brace));
  }

  const fs::path softmax_task_ =
      fs::path(KFORGE_SOURCE_DIR) / "tests" / "data" / "softmax_small" / "task.toml";
  fs::path dir_;
};

TEST_F(CliEvalTest, ACorrectKernelIsGatedAndTimedAgainstTheReferenceWithAnInterval) {
  const fs::path kernel = fs::path(KFORGE_SOURCE_DIR) / "examples/softmax/reference.cpp";
  process::CommandResult result = eval(softmax_task_, kernel, {"--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json j = json_of(result.output);
  EXPECT_EQ(j["verdict"], "ok") << j.dump(2);
  EXPECT_TRUE(j["correct"].get<bool>());
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["rungs"].size(), 2u) << j.dump(2);  // rungs 0 and 1
  EXPECT_GT(j["final"]["kernel_median_ms"].get<double>(), 0.0);
  EXPECT_GT(j["final"]["reference_median_ms"].get<double>(), 0.0);
  EXPECT_LE(j["final"]["ci_low"].get<double>(), j["final"]["speedup"].get<double>());
  EXPECT_GE(j["final"]["ci_high"].get<double>(), j["final"]["speedup"].get<double>());
  EXPECT_EQ(j["full"]["workloads"].size(), 1u);
  EXPECT_TRUE(j["profile"].is_null());  // cpu: nothing profiles it
  // Nothing went to the memory.
  EXPECT_FALSE(fs::exists(dir_ / "memory.sqlite"));
}

TEST_F(CliEvalTest, AWrongKernelIsAWrongAnswerNamingTheElement) {
  const fs::path kernel = softmax_variant(
      "wrong.cpp", "yr[c] = static_cast<float>(",
      "yr[c] = c + 1 == cols ? 0.0f : static_cast<float>(");
  process::CommandResult result = eval(softmax_task_, kernel);
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("verdict: wrong_answer at rungs 0-1"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("output 'y': element ["), std::string::npos) << result.output;
}

TEST_F(CliEvalTest, KernelsThatFailBeforeRunningGetTheirVerdicts) {
  process::CommandResult result =
      eval(softmax_task_, softmax_variant("noentry.cpp", "kforge_run", "my_run"));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("verdict: wrong_signature"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("does not export kforge_run"), std::string::npos) << result.output;

  result = eval(softmax_task_, softmax_variant("syntax.cpp", "return 0;\n}", "return oops;\n}"));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("verdict: compile_error at compile"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("oops"), std::string::npos) << result.output;

  result = eval(softmax_task_, softmax_variant("threads.cpp", "#include <cmath>",
                                               "#include <cmath>\n#include <thread>"));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("verdict: rejected_by_policy at screen"), std::string::npos)
      << result.output;
}

TEST_F(CliEvalTest, FilesThatCannotBeEvaluatedAreErrorsSayingWhatIsTaken) {
  process::CommandResult result = eval(softmax_task_, dir_ / "missing.cpp");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("missing.cpp: no such kernel file (expected a .cpp source"),
            std::string::npos)
      << result.output;
  result = eval(softmax_task_, write("model_new.py", "class ModelNew: pass\n"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("model_new.py: a Python file; kforge eval takes a native kernel"),
            std::string::npos)
      << result.output;
}

TEST_F(CliEvalTest, ANativeKernelOfAPyTorchProblemGetsItsScalar) {
  const fs::path problem = write("scale.py", kScale);
  process::CommandResult result = eval(problem, write("scale.cpp", kScaleKernel), {"--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json j = json_of(result.output);
  EXPECT_EQ(j["verdict"], "ok") << j.dump(2);
  EXPECT_EQ(j["reference"]["reference"], problem.string());
}

}  // namespace
}  // namespace kforge

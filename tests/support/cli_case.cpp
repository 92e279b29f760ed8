#include "support/cli_case.h"

#include <fstream>

#include "support/test_python.h"

namespace kforge::testing {
namespace fs = std::filesystem;

void CliCase::SetUp() {
  dir_ = fs::temp_directory_path() /
         (prefix_ + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void CliCase::TearDown() { fs::remove_all(dir_); }

fs::path CliCase::write(const std::string& name, const std::string& text) const {
  std::ofstream(dir_ / name) << text;
  return dir_ / name;
}

process::CommandResult CliCase::kforge(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"env", "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                   "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                   "KFORGE_PYTHON=" + kforge::testing::test_python(),
                                   KFORGE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return process::run_command(argv, 600);
}

nlohmann::json json_in(const std::string& output) {
  const size_t brace = output.find("{\n");
  return brace == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output.substr(brace));
}

const char* const kScaleByScalarProblem = R"(import torch
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

const char* const kTooLargeProblem = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


rows = 1 << 20
cols = 1 << 20


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
)";

const char* const kScaleByScalarKernel = R"(#include <kforge/kernel.h>

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

}  // namespace kforge::testing

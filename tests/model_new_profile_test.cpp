// Profiling a Python candidate (a KernelBench ModelNew): NcuProfiler runs the Python candidate
// worker under ncu with an NVTX filter, and the worker opens that range around the profiled
// forward call only (python/tests/test_candidate_profile.py checks that side on its own).
//
// Here on the CPU: a stand-in for ncu records the command line it was given and runs the worker,
// so the test sees which worker was started, with which filter, and that the load and run
// requests reached it with the derived task and the range; `kforge eval` of a ModelNew on cpu
// says why it is not profiled. GpuModelNewProfile profiles one for real (cuda, ncu, a CUDA
// build of PyTorch; it skips without them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/files.h"
#include "common/scratch_dir.h"
#include "evaluation/profiler.h"
#include "process/subprocess.h"
#include "support/cli_case.h"
#include "task/torch_task.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

std::string corpus_dir() { return worker::testing::source_root() + "/tests/adversarial/torch"; }

worker::ProcessWorkerConfig python_candidate_worker(const std::string& backend) {
  const std::vector<std::string> command = torch_candidate_worker_command();
  worker::ProcessWorkerConfig config;
  config.worker_path = command.front();
  config.worker_arguments.assign(command.begin() + 1, command.end());
  config.environment = torch_environment(worker::scrubbed_environment());
  config.backend = backend;
  config.display_name = "python candidate worker";
  config.startup_timeout_s = 120;
  return config;
}

const Workload& timed_workload(const Task& task) {
  const auto timed = std::find_if(task.workloads.begin(), task.workloads.end(),
                                  [](const Workload& w) { return w.timed; });
  return timed != task.workloads.end() ? *timed : task.workloads.front();
}

// A stand-in for ncu: writes its arguments, one a line, to `args_path` up to the profiled
// program (`program`, the worker's interpreter), then runs that program with the rest.
std::string fake_ncu(const fs::path& dir, const std::string& program, const fs::path& args_path) {
  const fs::path script = dir / "ncu";
  write_file_atomically(script.string(),
                        "#!/bin/sh\n"
                        ": > '" +
                            args_path.string() +
                            "'\n"
                            "while [ \"$#\" -gt 0 ] && [ \"$1\" != '" +
                            program +
                            "' ]; do\n"
                            "  printf '%s\\n' \"$1\" >> '" +
                            args_path.string() +
                            "'\n"
                            "  shift\n"
                            "done\n"
                            "printf 'PROGRAM %s\\n' \"$*\" >> '" +
                            args_path.string() +
                            "'\n"
                            "exec \"$@\"\n");
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> lines;
  std::string text = fs::exists(path) ? read_file(path.string()) : "";
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

TEST(NcuCommand, FiltersByTheForwardRangeOnlyWhenAsked) {
  const std::vector<std::string> native = evaluation::ncu_command("/opt/ncu", "/tmp/log.csv");
  EXPECT_EQ(native.front(), "/opt/ncu");
  const auto after = [](const std::vector<std::string>& command, const std::string& flag) {
    const auto it = std::find(command.begin(), command.end(), flag);
    return it == command.end() || it + 1 == command.end() ? std::string("<absent>") : *(it + 1);
  };
  EXPECT_EQ(after(native, "--target-processes"), "all");
  EXPECT_EQ(after(native, "--log-file"), "/tmp/log.csv");
  EXPECT_EQ(after(native, "--page"), "raw");
  EXPECT_EQ(after(native, "--clock-control"), "none");
  EXPECT_NE(after(native, "--metrics").find("gpu__time_duration.sum"), std::string::npos);
  EXPECT_EQ(std::count(native.begin(), native.end(), "--nvtx"), 0);
  EXPECT_EQ(after(native, "--nvtx-include"), "<absent>");

  const std::vector<std::string> python =
      evaluation::ncu_command("/opt/ncu", "/tmp/log.csv", evaluation::kProfiledRange);
  EXPECT_EQ(after(python, "--target-processes"), "all");
  EXPECT_EQ(std::count(python.begin(), python.end(), "--nvtx"), 1);
  // The trailing slash selects a push/pop range (torch.cuda.nvtx.range_push) of that name.
  EXPECT_EQ(after(python, "--nvtx-include"), std::string(evaluation::kProfiledRange) + "/");
}

class ModelNewProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("KFORGE_INPUTS_LIB", KFORGE_INPUTS_LIB_PATH, 0);
    // Not a ScratchDir: /dev/shm may forbid running the stand-in for ncu.
    dir_ = fs::path(worker::testing::scratch_dir()) /
           ("model-new-profile-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    task_ = load_torch_task(corpus_dir() + "/problem.py");
    task_path_ = (dir_ / "reference.torch.json").string();
    write_file_atomically(task_path_, derived_json(task_).dump());
    candidate_.path = (dir_ / "honest_torch.py").string();
    fs::copy_file(corpus_dir() + "/candidates/honest_torch.py", candidate_.path);
    native_.worker_path = worker::testing::worker_path();
    native_.backend = "cpu";
  }

  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  Task task_;
  std::string task_path_;
  compile::Artifact candidate_;
  worker::ProcessWorkerConfig native_;
};

TEST_F(ModelNewProfileTest, RunsThePythonCandidateWorkerUnderNcuWithTheForwardRange) {
  const worker::ProcessWorkerConfig python = python_candidate_worker("cpu");
  const fs::path args_path = dir_ / "ncu_args.txt";
  const std::string ncu = fake_ncu(dir_, python.worker_path, args_path);
  ScratchDir profile_scratch;
  evaluation::NcuProfiler profiler(native_, ncu, profile_scratch, 120);
  profiler.set_python_worker(python, 120);
  const evaluation::ProfileReport report =
      profiler.profile(candidate_, task_, timed_workload(task_), {1, "", task_path_});
  // No real ncu: no counters. What stopped it says the requests arrived as sent: a CPU-only
  // PyTorch refuses the run's NVTX range (so the load, with its derived task, succeeded); a CUDA
  // build serves both calls, and the stand-in wrote no CSV.
  std::cout << "  " << report.message << "\n";
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(report.message.find("no NVTX") != std::string::npos ||
              report.message.find("no CSV header") != std::string::npos)
      << report.message;
  EXPECT_EQ(report.workload, timed_workload(task_).name);
  const std::vector<std::string> args = lines_of(args_path);
  ASSERT_FALSE(args.empty()) << "the stand-in for ncu never ran";
  const auto has = [&](const std::string& line) {
    return std::find(args.begin(), args.end(), line) != args.end();
  };
  EXPECT_TRUE(has("--nvtx"));
  EXPECT_TRUE(has(std::string(evaluation::kProfiledRange) + "/"));
  EXPECT_TRUE(has("--target-processes"));
  EXPECT_NE(args.back().find("kforge_torch candidate-worker --backend cpu"), std::string::npos)
      << args.back();
}

TEST_F(ModelNewProfileTest, WithoutAPythonWorkerAModelNewIsNotProfiledSayingWhy) {
  const fs::path args_path = dir_ / "ncu_args.txt";
  ScratchDir profile_scratch;
  evaluation::NcuProfiler profiler(native_, fake_ncu(dir_, "/none", args_path), profile_scratch,
                                   30);
  const evaluation::ProfileReport report =
      profiler.profile(candidate_, task_, timed_workload(task_), {1, "", task_path_});
  EXPECT_FALSE(report.ok);
  EXPECT_NE(report.message.find("not profiled"), std::string::npos) << report.message;
  EXPECT_FALSE(fs::exists(args_path));  // nothing was started
}

class ModelNewEvalProfileTest : public testing::CliCase {
 protected:
  ModelNewEvalProfileTest() : CliCase("kforge_model_new_profile_") {}
};

const char* const kModelNewHeader =
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, A, s):\n        return A * s\n";

TEST_F(ModelNewEvalProfileTest, ACpuModelNewSaysWhyItIsNotProfiled) {
  const fs::path problem = write("scale.py", testing::kScaleByScalarProblem);
  const process::CommandResult result =
      kforge({"eval", problem.string(), write("solution.py", kModelNewHeader).string(), "--backend",
              "cpu", "--final-rounds", "2", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json j = testing::json_in(result.output);
  EXPECT_TRUE(j["profile"].is_null()) << j.dump(2);
  const std::string notes = j["reference"]["notes"].dump();
  EXPECT_NE(notes.find("not profiled: Nsight Compute profiles GPU kernels, and this one ran on "
                       "cpu"),
            std::string::npos)
      << notes;
}

// The problem of the GPU test: A * s on 4096 x 4096 floats (64 MiB in, 64 MiB out).
const char* const kLargeScaleProblem = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        return A * s


M = 4096
N = 4096


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
)";

class GpuModelNewProfile : public testing::CliCase {
 protected:
  GpuModelNewProfile() : CliCase("kforge_gpu_model_new_profile_") {}

  // Why this machine cannot profile a ModelNew on cuda, or "".
  static std::string missing() {
    if (backends::find_backend("cuda") == nullptr) return "the cuda backend is not in this build";
    if (!evaluation::find_ncu()) return "no ncu";
    try {
      worker::ProcessWorker probe(worker::testing::worker_path(), "cuda", 0);
      probe.device_info();
    } catch (const Error& e) {
      return std::string("no usable CUDA device: ") + e.what();
    }
    const process::CommandResult torch =
        process::run_command({torch_python(), "-c",
                              "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"},
                             120.0);
    if (torch.exit_code != 0) return torch_python() + " has no CUDA build of PyTorch";
    return "";
  }
};

// `kforge eval PROBLEM.py solution.py --backend cuda --profile on`: the report holds exactly the
// one kernel forward launches (A * s: an elementwise multiply), with counters, and none of the
// harness's (the input copies before it, the warm-up call's kernels).
TEST_F(GpuModelNewProfile, EvalProfilesTheKernelsOfForwardOnly) {
  if (const std::string why = missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path problem = write("scale.py", kLargeScaleProblem);
  const process::CommandResult result =
      kforge({"eval", problem.string(), write("solution.py", kModelNewHeader).string(), "--backend",
              "cuda", "--final-rounds", "2", "--profile", "on", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json j = testing::json_in(result.output);
  ASSERT_TRUE(j["profile"].is_object()) << j.dump(2);
  const nlohmann::json& profile = j["profile"];
  if (!profile["ok"].get<bool>() &&
      profile["message"].get<std::string>().find("no counter") != std::string::npos) {
    GTEST_SKIP() << "ncu cannot read counters here: " << profile["message"];
  }
  ASSERT_TRUE(profile["ok"].get<bool>()) << profile.dump(2);
  ASSERT_EQ(profile["kernels"].size(), 1u) << "only forward's kernel: " << profile.dump(2);
  const nlohmann::json& kernel = profile["kernels"][0];
  EXPECT_NE(kernel["name"].get<std::string>().find("Mul"), std::string::npos) << kernel.dump(2);
  EXPECT_GT(kernel["metrics"]["gpu__time_duration.sum"].get<double>(), 0.0) << kernel.dump(2);
  // 4096 x 4096 floats read: 64 MiB from DRAM at least (ncu flushes the caches first). Writes
  // are not held to their 64 MiB: L2 is write-back, and what it still holds when the kernel
  // ends never reaches DRAM inside the kernel (on an H100, 113.6 MB of reads and writes in all).
  EXPECT_GT(kernel["metrics"]["dram__bytes_read.sum"].get<double>(), 0.9 * 4 * 4096.0 * 4096.0)
      << kernel.dump(2);
  EXPECT_GT(kernel["metrics"]["dram__bytes_write.sum"].get<double>(), 0.0) << kernel.dump(2);
  ASSERT_GE(profile["diagnosis"].size(), 2u) << profile.dump(2);
  EXPECT_EQ(profile["workload"], j["reference"]["timed_workload"]) << j.dump(2);
  for (const auto& line : profile["diagnosis"])
    std::cout << "  " << line.get<std::string>() << "\n";
}

}  // namespace
}  // namespace kforge

// End-to-end tests of the kforge executable, as a user runs it: real compiler, real worker
// process, real SQLite memory, on the cpu backend.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process/subprocess.h"
#include "support/backends.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs kforge with `args` under `env` (NAME=value entries added to a minimal environment).
  process::CommandResult kforge(std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"env", "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string()};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }

  std::string example(const std::string& relative) {
    return (fs::path(KFORGE_SOURCE_DIR) / relative).string();
  }

  fs::path dir_;
};

TEST_F(CliTest, OptimizeOnCpuWritesAVerifiedResult) {
  fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", example("tests/data/softmax_small/task.toml"), "--backend", "cpu",
              "--run-dir", run.string(), "--steps", "2", "--proposals", "2", "--final-rounds", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("speedup:"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("% CI"), std::string::npos) << result.output;
  ASSERT_TRUE(fs::exists(run / "result.json"));
  nlohmann::json json = nlohmann::json::parse(std::ifstream(run / "result.json"));
  ASSERT_FALSE(json["best"].is_null()) << json.dump(2);
  EXPECT_EQ(json["backend"], "cpu");
  EXPECT_GE(json["candidates"].size(), 3u);
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(run / "best.cpp"));
  EXPECT_TRUE(fs::exists(run / "report.md"));
  EXPECT_TRUE(fs::exists(run / "events.jsonl"));
  // The prepare says where its time went, phase by phase, adding up to its seconds.
  std::ifstream events(run / "events.jsonl");
  bool prepared = false;
  for (std::string line; std::getline(events, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["event"] != "task_prepared") continue;
    prepared = true;
    double sum = 0.0;
    for (const char* phase : {"workers", "reference_load", "provided_inputs", "gate_outputs",
                              "self_test", "timed_outputs", "compile_baseline"}) {
      ASSERT_TRUE(event["phases"].contains(phase)) << event.dump();
      sum += event["phases"][phase].get<double>();
    }
    EXPECT_NEAR(sum, event["seconds"].get<double>(), 0.01 + 0.05 * sum) << event.dump();
  }
  EXPECT_TRUE(prepared);
  EXPECT_TRUE(fs::exists(dir_ / "memory.sqlite"));
  // Every candidate left its source, build log and evaluation.
  for (const auto& entry : fs::directory_iterator(run / "candidates")) {
    EXPECT_TRUE(fs::exists(entry.path() / "evaluation.json")) << entry.path();
    EXPECT_TRUE(fs::exists(entry.path() / "build.log")) << entry.path();
  }
}

TEST_F(CliTest, MalformedTaskNamesFileAndFieldAndWritesNoRun) {
  fs::path task = dir_ / "task.toml";
  std::ofstream(task) << "name = \"x\"\nfamily = \"softmax\"\n[[inputs]]\nname = \"x\"\n"
                         "dtype = \"float32\"\nshape = [\"n\"]\n";
  fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", task.string(), "--backend", "cpu", "--run-dir", run.string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("kforge: error:"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("inputs[0].dtype"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliTest, AFamilyWithoutBuiltInKernelsSaysWhatANewOperatorNeeds) {
  // softmax_small as a new operator "rowmax" (references by absolute path).
  std::ifstream in(example("tests/data/softmax_small/task.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replace = [&text](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("family = \"softmax\"", "family = \"rowmax\"");
  replace("\"../../../examples/softmax/reference.cpp\"",
          "\"" + example("examples/softmax/reference.cpp") + "\"");
  replace("\"../../../examples/softmax/reference.cu\"",
          "\"" + example("examples/softmax/reference.cu") + "\"");
  const fs::path task = dir_ / "rowmax.toml";
  std::ofstream(task) << text;
  const fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", task.string(), "--backend", "cpu", "--run-dir", run.string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("no built-in cpu kernels for 'rowmax'"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("a new operator needs --generator llm, or its own"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliTest, MissingNvccIsAClearErrorBeforeAnythingIsWritten) {
  fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", example("tests/data/softmax_small/task.toml"), "--backend", "cuda",
              "--run-dir", run.string()},
             {"PATH=/usr/bin:/bin", "KFORGE_NVCC=", "CUDA_HOME=/nonexistent"});
  EXPECT_EQ(result.exit_code, 1);
  // Without the cuda backend in the build the same run stops earlier, saying that instead.
  const std::string expected = testing::has_backend("cuda")
                                   ? "nvcc not found"
                                   : "the cuda backend is not in this build: kforge was built "
                                     "without the CUDA toolkit";
  EXPECT_NE(result.output.find(expected), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliTest, UnknownBackendAndSubcommandAreUsageErrors) {
  process::CommandResult backend = kforge(
      {"optimize", example("tests/data/softmax_small/task.toml"), "--backend", "tpu"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_NE(backend.output.find("tpu"), std::string::npos) << backend.output;
  process::CommandResult typo = kforge({"optimise"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("did you mean 'optimize'"), std::string::npos) << typo.output;
}

TEST_F(CliTest, AFolderGivenAsTheTaskPointsAtItsTaskFile) {
  const std::string folder = example("tests/data/softmax_small");
  process::CommandResult with_task = kforge({"optimize", folder});
  EXPECT_EQ(with_task.exit_code, 2) << with_task.output;
  EXPECT_NE(with_task.output.find(folder + " is a directory; did you mean " + folder +
                                  "/task.toml?"),
            std::string::npos)
      << with_task.output;
  process::CommandResult without = kforge({"optimize", dir_.string()});
  EXPECT_EQ(without.exit_code, 2) << without.output;
  EXPECT_NE(without.output.find(dir_.string() + " is a directory; expected a task file"),
            std::string::npos)
      << without.output;
}

TEST_F(CliTest, ABadValueFromAnEnvironmentVariableNamesTheVariable) {
  const std::string task = example("tests/data/softmax_small/task.toml");
  process::CommandResult steps = kforge({"optimize", task}, {"KFORGE_STEPS=abc"});
  EXPECT_EQ(steps.exit_code, 2) << steps.output;
  EXPECT_NE(steps.output.find("--steps (from KFORGE_STEPS): expected a whole number from 0 to "
                              "100000, got 'abc'"),
            std::string::npos)
      << steps.output;
  process::CommandResult seed = kforge({"optimize", task}, {"KFORGE_SEED=x"});
  EXPECT_EQ(seed.exit_code, 2) << seed.output;
  EXPECT_NE(seed.output.find("--seed (from KFORGE_SEED)"), std::string::npos) << seed.output;
  // The flag wins over the variable, so its bad value is the flag's.
  process::CommandResult flag = kforge({"optimize", task, "--steps=abc"}, {"KFORGE_STEPS=3"});
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_NE(flag.output.find("--steps: expected a whole number"), std::string::npos)
      << flag.output;
  EXPECT_EQ(flag.output.find("KFORGE_STEPS"), std::string::npos) << flag.output;
  // --devices is not --device: KFORGE_DEVICE does not take the blame for a bad --devices.
  process::CommandResult devices =
      kforge({"optimize", task}, {"KFORGE_DEVICES=0,x", "KFORGE_DEVICE=0"});
  EXPECT_NE(devices.output.find("--devices (from KFORGE_DEVICES)"), std::string::npos)
      << devices.output;
}

// Every numeric option says what it expects, in one short line: `--seed -1` ran with seed
// 18446744073709551615, `--steps 1.5` said "Value 1.5 not in range 0 to 100000", `--max-candidates
// 1.5` "Could not convert", a weight "not in range 0.000000 to 1.000000".
TEST_F(CliTest, ANumericOptionRefusesABadValueSayingWhatItExpects) {
  const std::string task = example("tests/data/softmax_small/task.toml");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--seed", "-1"}, "--seed: expected a whole number from 0 to 18446744073709551615, got '-1'"},
      {{"--steps", "1.5"}, "--steps: expected a whole number from 0 to 100000, got '1.5'"},
      {{"--max-candidates", "1.5"},
       "--max-candidates: expected a whole number from 1 to 2147483647, got '1.5'; leave it out "
       "for no limit"},
      {{"--weight-other-device", "2"}, "--weight-other-device: expected a number from 0 to 1, got '2'"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"optimize", task, "--run-dir", (dir_ / "run").string()};
    args.insert(args.end(), flags.begin(), flags.end());
    process::CommandResult result = kforge(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(dir_ / "run")) << flags.front();
  }
}

// A task whose cpu reference is `reference_source`, at the softmax_small shapes.
std::string task_with_reference(const fs::path& dir, const std::string& reference_source) {
  std::ifstream in(fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = text.substr(0, text.find("[reference]")) + "[reference]\ncpu = \"ref.cpp\"\n";
  std::ofstream(dir / "task.toml") << text;
  std::ofstream(dir / "ref.cpp") << reference_source;
  return (dir / "task.toml").string();
}

TEST_F(CliTest, ReferenceThatDoesNotCompileIsAnErrorAndLeavesNoRun) {
  std::string task = task_with_reference(dir_, "#include <kforge/kernel.h>\nnot C++\n");
  fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", task, "--backend", "cpu", "--run-dir", run.string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("reference does not compile"), std::string::npos) << result.output;
  // The compiler's messages name the task's file and line, not the cached copy it compiled.
  EXPECT_NE(result.output.find((dir_ / "ref.cpp").string() + ":2:"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find((dir_ / "cache").string()), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliTest, ReferenceThatLeavesOutputsUnwrittenIsRefused) {
  std::string task = task_with_reference(dir_, R"(#include <kforge/kernel.h>
KFORGE_API int kforge_run(const kforge_args* a) {
  float* y = (float*)a->outputs[0].data;
  for (int64_t i = 0; i < kforge_numel(&a->outputs[0]) / 2; ++i) y[i] = 1.0f;
  return 0;
})");
  fs::path run = dir_ / "run";
  process::CommandResult result =
      kforge({"optimize", task, "--backend", "cpu", "--run-dir", run.string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("left output 'y' unwritten at"), std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliTest, NoCorrectCandidateExitsThreeAndSaysWhatTheCandidatesGot) {
  // The reference computes x + 1, which no softmax kernel does: every candidate is wrong. A script
  // running `kforge optimize TASK && cp RUN/best.cpp ...` must not see success (it exited 0).
  std::string task = task_with_reference(dir_, R"(#include <kforge/kernel.h>
KFORGE_API int kforge_run(const kforge_args* a) {
  const float* x = (const float*)a->inputs[0].data;
  float* y = (float*)a->outputs[0].data;
  for (int64_t i = 0; i < kforge_numel(&a->outputs[0]); ++i) y[i] = x[i] + 1.0f;
  return 0;
})");
  fs::path run = dir_ / "run";
  process::CommandResult result = kforge(
      {"optimize", task, "--backend", "cpu", "--run-dir", run.string(), "--steps", "1"});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("wrong_answer); nothing to report as faster"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("no correct candidate: no best kernel was written (exit code 3)"),
            std::string::npos)
      << result.output;
  EXPECT_TRUE(fs::exists(run / "result.json"));
  EXPECT_FALSE(fs::exists(run / "best.cpp"));
  // Resuming the finished run reports it again, with the same exit code.
  process::CommandResult again = kforge({"optimize", "--resume", run.string()});
  EXPECT_EQ(again.exit_code, 3) << again.output;
}

TEST_F(CliTest, ExistingRunDirectoryIsNotOverwritten) {
  fs::path run = dir_ / "run";
  fs::create_directories(run);
  std::ofstream(run / "keep.txt") << "user data\n";
  process::CommandResult result = kforge({"optimize", example("tests/data/softmax_small/task.toml"),
                                          "--backend", "cpu", "--run-dir", run.string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("already exists"), std::string::npos) << result.output;
  EXPECT_TRUE(fs::exists(run / "keep.txt"));
}

// Runs argv (argv[0] searched in PATH) with its stdout a pipe whose reading end is already
// closed, as `kforge ... | head` after head exited, and its stderr into `log`. SIGPIPE is reset
// to its default in the child, as in a shell. Returns the wait status.
int run_with_closed_stdout(const std::vector<std::string>& argv, const fs::path& log) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  close(fds[0]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawned = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(fds[1]);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A whole optimize run for one signal (about 50 s on a busy 2-core machine): labelled `slow`,
// run by scripts/test-slow.
class SlowCliTest : public CliTest {};

TEST_F(SlowCliTest, AClosedStdoutDoesNotKillTheRun) {
  fs::path run = dir_ / "run";
  const std::vector<std::string> argv = {
      "env", "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
      "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(), KFORGE_CLI_PATH, "optimize",
      example("tests/data/softmax_small/task.toml"), "--backend", "cpu", "--run-dir",
      run.string(), "--steps", "1", "--proposals", "1", "--final-rounds", "2"};
  const fs::path log = dir_ / "stderr.log";
  const int status = run_with_closed_stdout(argv, log);
  std::ifstream in(log);
  const std::string stderr_text((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  EXPECT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status) << "\n"
                                    << stderr_text;
  ASSERT_TRUE(WIFEXITED(status)) << stderr_text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << stderr_text;
  EXPECT_TRUE(fs::exists(run / "result.json"));
  EXPECT_TRUE(fs::exists(run / "report.md"));
}

}  // namespace
}  // namespace kforge

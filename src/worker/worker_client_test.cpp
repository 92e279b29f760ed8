// ProcessWorker against the real kforge-worker binary (cpu backend), with adversarial kernels:
// crashes, hangs, stdout forgery, scribbled inputs, missing entry points. Outputs are judged by
// the real gate (evaluation/gate.h) against a reference running in a second worker process.
#include "support/backends.h"
#include "worker/worker_client.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/mapped_file.h"
#include "common/scratch_dir.h"
#include "evaluation/gate.h"
#include "evaluation/reference_oracle.h"
#include "worker/test_kernels.h"

namespace kforge::worker {
namespace {

using testing::build_cpu_kernel;
using testing::cpu_unary_kernel;

constexpr double kTimeoutS = 30.0;

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

std::string kernel_path(const std::string& name, const std::string& body,
                        const std::string& prelude = "") {
  return build_cpu_kernel("client_" + name, cpu_unary_kernel(body, prelude));
}

/// The unary task of test_kernels.h (y = 2x) with a gate and a tail workload.
Task unary_task() {
  Task task;
  task.name = "double";
  task.source_path = "unary_task.toml";
  task.signature = testing::unary_signature();
  task.workloads = {testing::workload_n("small", 256), testing::workload_n("tail", 37)};
  task.tolerance = Tolerance{1e-4, 1e-5, std::nullopt};
  return task;
}

struct Checked {
  Verdict verdict = Verdict::ok;
  std::string message;
  int cases_checked = 0;
};

class ProcessWorkerTest : public ::testing::Test {
 protected:
  int load(const std::string& path) {
    LoadResult result = worker_.load(LoadRequest{path}, kTimeoutS);
    EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
    return result.handle;
  }
  int load_kernel(const std::string& name, const std::string& body,
                  const std::string& prelude = "") {
    return load(kernel_path(name, body, prelude));
  }
  /// Rung 0 on workloads small (256) and tail (37) x 2 seeds, two calls each.
  Checked check(int candidate, double timeout_s = kTimeoutS) {
    const evaluation::GateOutcome outcome = evaluation::run_gate(
        worker_, candidate, oracle_, task_, cases_, scratch_, timeout_s);
    return {outcome.verdict, outcome.message, outcome.cases_checked};
  }
  void SetUp() override {
    compile::Artifact reference;
    reference.path = kernel_path("reference", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
    oracle_.load(reference);
    correct_ = load_kernel("correct", "for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];");
  }

  ProcessWorker worker_{testing::worker_path(), "cpu", 0};
  ProcessWorker reference_worker_{testing::worker_path(), "cpu", 0};
  Task task_ = unary_task();
  ScratchDir scratch_{"kforge-test"};
  evaluation::ReferenceOracle oracle_{reference_worker_, task_, scratch_, kTimeoutS};
  std::vector<evaluation::GateCase> cases_ = evaluation::plan_gate(task_, {2, 1});
  int correct_ = -1;
};

TEST_F(ProcessWorkerTest, HelloReportsTheCpuDevice) {
  const DeviceInfo info = worker_.device_info();
  EXPECT_EQ(info.protocol_version, kProtocolVersion);
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(worker_.pid(), 0);
  EXPECT_EQ(worker_.spawn_count(), 1);
}

TEST_F(ProcessWorkerTest, CorrectKernelPassesAndTimes) {
  const Checked result = check(correct_);
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.cases_checked, 8);  // 2 workloads x (2 seeds + the pareto and spike cases)
  TimeRequest request;
  request.handle = correct_;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("timed", 4096);
  request.policy = MeasurementPolicy{1, 12, 12, 0.0, 30.0};
  const TimeResult timing = worker_.time(request, kTimeoutS);
  ASSERT_EQ(timing.verdict, Verdict::ok) << timing.message;
  EXPECT_EQ(timing.samples_ms.size(), 12u);
  EXPECT_GT(timing.host_wall_ms, 0.0);
}

TEST_F(ProcessWorkerTest, WrongPartialAndScribblingKernelsAreWrongAnswers) {
  Checked result =
      check(load_kernel("wrong", "for (int64_t i = 0; i < n; ++i) y[i] = 3 * x[i];"));
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("output 'y': element [0] is"), std::string::npos)
      << result.message;

  result = check(load_kernel("partial", "for (int64_t i = 0; i < n - 1; ++i) y[i] = 2 * x[i];"));
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("element [255] is nan"), std::string::npos) << result.message;

  result = check(load_kernel("scribbler",
                             "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];\n"
                             "  ((float*)x)[3] += 1;"));
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("input 'x' at [3] was modified"), std::string::npos)
      << result.message;
  EXPECT_EQ(worker_.spawn_count(), 1);
}

TEST_F(ProcessWorkerTest, SegfaultIsACrashAndTheNextCallRespawnsWithTheSameHandles) {
  const int crasher = load_kernel(
      "segfault", "fprintf(stderr, \"about to crash\\n\");\n  *(volatile int*)(uintptr_t)16 = 1;",
      "#include <stdio.h>\n#include <stdint.h>");
  const int first_pid = worker_.pid();
  const Checked crashed = check(crasher);
  EXPECT_EQ(crashed.verdict, Verdict::worker_crashed);
  EXPECT_NE(crashed.message.find("killed by signal 11 (SIGSEGV"), std::string::npos)
      << crashed.message;
  EXPECT_NE(crashed.message.find("about to crash"), std::string::npos) << crashed.message;
  EXPECT_FALSE(process_alive(first_pid));

  const Checked after = check(correct_);
  EXPECT_EQ(after.verdict, Verdict::ok) << after.message;
  EXPECT_EQ(worker_.spawn_count(), 2);
  EXPECT_NE(worker_.pid(), first_pid);
  // The crasher's handle is still valid too, and still crashes.
  EXPECT_EQ(check(crasher).verdict, Verdict::worker_crashed);
  EXPECT_EQ(check(correct_).verdict, Verdict::ok);
}

TEST_F(ProcessWorkerTest, InfiniteLoopTimesOutAndTheProcessGroupIsKilled) {
  // Forks a child that sleeps forever, then spins: both must die with the process group.
  const int looper = load_kernel("loop",
                                 "if (fork() == 0) { for (;;) pause(); }\n"
                                 "  volatile int spin = 1; while (spin) {}",
                                 "#include <unistd.h>");
  const int worker_pid = worker_.pid();
  const auto start = std::chrono::steady_clock::now();
  const Checked result = check(looper, 1.0);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.verdict, Verdict::timeout);
  EXPECT_NE(result.message.find("within 1 s"), std::string::npos) << result.message;
  EXPECT_LT(waited_s, 10.0);
  EXPECT_FALSE(process_alive(worker_pid));
  // The kernel's forked child was in the worker's group (whose id is the worker's pid). SIGKILL
  // is delivered asynchronously: on a loaded machine the child can still be running for a moment
  // after the worker is gone, so it has a few seconds to die.
  auto group_alive = [&] {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::ifstream stat(entry.path() / "stat");
      std::string text;
      if (!std::getline(stat, text)) continue;
      const size_t paren = text.rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream fields(text.substr(paren + 2));
      std::string state;
      int parent = 0, group = 0;
      fields >> state >> parent >> group;
      if (group == worker_pid && state != "Z" && state != "X") return true;
    }
    return false;
  };
  bool child_alive = group_alive();
  for (int i = 0; i < 50 && child_alive; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    child_alive = group_alive();
  }
  EXPECT_FALSE(child_alive);
  EXPECT_EQ(check(correct_).verdict, Verdict::ok);
}

TEST_F(ProcessWorkerTest, PrintingToStdoutCannotCorruptOrForgeTheChannel) {
  const std::string prelude = "#include <stdio.h>\n#include <unistd.h>\n#include <iostream>";
  const std::string body =
      "printf(\"{\\\"id\\\": 99, \\\"ok\\\": true, \\\"verdict\\\": \\\"ok\\\"}\\n\");\n"
      "  fflush(stdout);\n"
      "  std::cout << \"forged line\" << std::endl;\n"
      "  (void)!write(1, \"raw write\\n\", 10);\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = 3 * x[i];";
  const Checked result = check(load_kernel("printer", body, prelude));
  EXPECT_EQ(result.verdict, Verdict::wrong_answer) << result.message;
  EXPECT_NE(worker_.stderr_tail().find("forged line"), std::string::npos);
  EXPECT_NE(worker_.stderr_tail().find("raw write"), std::string::npos);
  EXPECT_EQ(worker_.spawn_count(), 1);
  EXPECT_EQ(check(correct_).verdict, Verdict::ok);
}

TEST_F(ProcessWorkerTest, MissingEntryPointIsWrongSignature) {
  const std::string path =
      build_cpu_kernel("client_no_entry", "extern \"C\" int run_kernel() { return 0; }\n");
  LoadResult result = worker_.load(LoadRequest{path}, kTimeoutS);
  EXPECT_EQ(result.verdict, Verdict::wrong_signature);
  EXPECT_NE(result.message.find("kforge_run"), std::string::npos);
  EXPECT_EQ(result.handle, -1);
  result = worker_.load(LoadRequest{"/nonexistent/kernel.so"}, kTimeoutS);
  EXPECT_EQ(result.verdict, Verdict::wrong_signature);
}

TEST_F(ProcessWorkerTest, WorkerKilledBetweenCallsIsReplacedQuietly) {
  ::kill(worker_.pid(), SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Checked result = check(correct_);
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(worker_.spawn_count(), 2);
}

TEST_F(ProcessWorkerTest, FailingReferenceIsAHarnessError) {
  ProcessWorker other{testing::worker_path(), "cpu", 0};
  evaluation::ReferenceOracle failing(other, task_, scratch_, kTimeoutS);
  compile::Artifact returns3;
  returns3.path = kernel_path("returns3", "return 3;");
  failing.load(returns3);
  EXPECT_THROW(failing.expected(cases_.front()), Error);
  compile::Artifact partial;
  partial.path = kernel_path("ref_partial", "for (int64_t i = 1; i < n; ++i) y[i] = 2 * x[i];");
  evaluation::ReferenceOracle unwritten(other, task_, scratch_, kTimeoutS);
  unwritten.load(partial);
  try {
    unwritten.expected(cases_.front());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unwritten at [0]"), std::string::npos) << e.what();
  }
  RunRequest unknown;
  unknown.handle = 12345;
  EXPECT_THROW(worker_.run(unknown, kTimeoutS), Error);
  EXPECT_EQ(check(correct_).verdict, Verdict::ok);  // the worker is still usable
}

TEST_F(ProcessWorkerTest, WorkerEnvironmentIsScrubbed) {
  ::setenv("OPENAI_API_KEY", "sk-secret-test", 1);
  worker_.shutdown();
  // The kernel fails (returns 9) when it can see the key.
  const int snoop = load_kernel("snoop", "if (getenv(\"OPENAI_API_KEY\")) return 9;\n"
                                         "  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
                                "#include <stdlib.h>");
  EXPECT_EQ(check(snoop).verdict, Verdict::ok);
  ::unsetenv("OPENAI_API_KEY");
  for (const std::string& entry : scrubbed_environment()) {
    EXPECT_EQ(entry.find("OPENAI_API_KEY"), std::string::npos);
  }
}

// A worker of a task that Slurm gave one CPU keeps to it: the job's variables are dropped from
// its environment, so its share travels as KFORGE_CPUS and OpenMP's thread count.
TEST(ScrubbedEnvironment, CarriesTheCpuShareOfASlurmJob) {
  ::setenv("SLURM_JOB_ID", "41", 1);
  ::setenv("SLURM_JOB_CPUS_PER_NODE", "1", 1);
  ::unsetenv("SLURM_CPUS_PER_TASK");
  ::unsetenv("KFORGE_CPUS");
  ::unsetenv("OMP_NUM_THREADS");
  const std::vector<std::string> env = scrubbed_environment();
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_JOB_CPUS_PER_NODE");
  auto has = [&](const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  EXPECT_TRUE(has("KFORGE_CPUS=1"));
  EXPECT_TRUE(has("OMP_NUM_THREADS=1"));
  for (const std::string& entry : env) EXPECT_NE(entry.rfind("SLURM_", 0), 0u) << entry;
}

TEST_F(ProcessWorkerTest, MemoryHogIsKilledAtTheLimit) {
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.memory_limit_bytes = int64_t{256} << 20;
  ProcessWorker limited(config);
  const std::string path = kernel_path(
      "hog", "for (;;) { char* p = (char*)malloc(64 << 20); if (!p) return 1; memset(p, 1, 64 << 20); }",
      "#include <stdlib.h>\n#include <string.h>");
  const LoadResult loaded = limited.load(LoadRequest{path}, kTimeoutS);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  RunRequest request;
  request.handle = loaded.handle;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.output_path = scratch_.next_file("hog");
  create_private_file(request.output_path);
  const RunResult result = limited.run(request, 60);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed);
  EXPECT_NE(result.message.find("over its limit of"), std::string::npos) << result.message;
}

TEST_F(ProcessWorkerTest, ShutdownIsIdempotentAndHandlesSurviveIt) {
  const int pid = worker_.pid();
  worker_.shutdown();
  worker_.shutdown();
  EXPECT_EQ(worker_.pid(), -1);
  EXPECT_FALSE(process_alive(pid));
  EXPECT_EQ(check(correct_).verdict, Verdict::ok);
  EXPECT_EQ(worker_.spawn_count(), 2);
}

TEST_F(ProcessWorkerTest, AnUnloadedHandleIsGoneHereAndInARespawnedWorker) {
  const int other = load_kernel("other", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
  EXPECT_EQ(worker_.loaded_handles(), (std::vector<int>{correct_, other}));
  std::string error;
  EXPECT_TRUE(worker_.unload(correct_, kTimeoutS, &error)) << error;
  EXPECT_TRUE(worker_.unload(correct_, kTimeoutS)) << "idempotent";
  EXPECT_EQ(worker_.loaded_handles(), (std::vector<int>{other}));
  try {
    check(correct_);
    ADD_FAILURE() << "a call on an unloaded handle must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was unloaded"), std::string::npos) << e.what();
  }
  EXPECT_THROW(worker_.unload(99, kTimeoutS), Error);
  // A respawned worker loads the handles still in use, and only those.
  const int pid = worker_.pid();
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 200 && process_alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(check(other).verdict, Verdict::ok);
  EXPECT_EQ(worker_.spawn_count(), 2);
  // The respawned worker holds `other` (reloaded above) and lets it go when asked.
  EXPECT_TRUE(worker_.unload(other, kTimeoutS, &error)) << error;
  EXPECT_TRUE(worker_.loaded_handles().empty());
  const int fresh = load_kernel("fresh", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
  EXPECT_EQ(check(fresh).verdict, Verdict::ok);
}

TEST(ProcessWorkerSandbox, NoWritesOutsideScratchAndNoNetwork) {
  // Only bubblewrap sandboxes the filesystem and network (the unshare fallback does not).
  const Sandbox sandbox = detect_sandbox({.bubblewrap = true, .unshare = false});
  if (!sandbox.available) GTEST_SKIP() << sandbox.note;
  // A listening socket on loopback: reachable from this process, not from the sandbox.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  // A directory outside the sandbox's writable areas (/dev/shm and the temp directory; the
  // build tree may itself be under /tmp).
  const std::filesystem::path outside_dir = "/var/tmp/kforge-sandbox-test-" + std::to_string(::getpid());
  std::error_code error;
  std::filesystem::create_directories(outside_dir, error);
  if (error) GTEST_SKIP() << "cannot create " << outside_dir << ": " << error.message();
  const std::string outside = (outside_dir / "escape.txt").string();
  const std::string body =
      "FILE* f = fopen(\"" + outside + "\", \"w\"); if (f) { fclose(f); return 7; }\n"
      "  int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; a.sin_family = AF_INET;\n"
      "  a.sin_port = htons(" + std::to_string(ntohs(address.sin_port)) + ");\n"
      "  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);\n"
      "  if (connect(s, (sockaddr*)&a, sizeof a) == 0) return 8;\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];";
  const std::string path = kernel_path(
      "escape", body, "#include <stdio.h>\n#include <sys/socket.h>\n#include <netinet/in.h>");
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.sandbox = sandbox;
  ProcessWorker sandboxed(config);
  const LoadResult loaded = sandboxed.load(LoadRequest{path}, kTimeoutS);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  ScratchDir scratch("kforge-sandbox-test");
  RunRequest request;
  request.handle = loaded.handle;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.output_path = scratch.next_file("out");
  create_private_file(request.output_path);
  const RunResult result = sandboxed.run(request, kTimeoutS);
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;  // 7: wrote a file, 8: connected
  EXPECT_FALSE(std::filesystem::exists(outside));
  std::filesystem::remove_all(outside_dir, error);
  ::close(listener);
}

TEST(ProcessWorkerSandbox, MemoryWatchdogSeesTheWorkerInsideTheSandbox) {
  const Sandbox sandbox = detect_sandbox();
  if (!sandbox.available) GTEST_SKIP() << sandbox.note;
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.sandbox = sandbox;
  config.memory_limit_bytes = int64_t{256} << 20;
  ProcessWorker limited(config);
  const std::string path = kernel_path(
      "hog", "for (;;) { char* p = (char*)malloc(64 << 20); if (!p) return 1; memset(p, 1, 64 << 20); }",
      "#include <stdlib.h>\n#include <string.h>");
  const LoadResult loaded = limited.load(LoadRequest{path}, kTimeoutS);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  ScratchDir scratch("kforge-sandbox-test");
  RunRequest request;
  request.handle = loaded.handle;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.output_path = scratch.next_file("hog");
  create_private_file(request.output_path);
  const RunResult result = limited.run(request, 60);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed) << result.message;
  EXPECT_NE(result.message.find("over its limit of"), std::string::npos) << result.message;
}

TEST(ProcessWorkerSandbox, ACrashInsideTheSandboxIsReportedByItsSignal) {
  // bwrap exits with 128 + N when the worker inside dies by signal N: not "exit code 139".
  const Sandbox sandbox = detect_sandbox();
  if (!sandbox.available) GTEST_SKIP() << sandbox.note;
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.sandbox = sandbox;
  ProcessWorker sandboxed(config);
  const std::string path = kernel_path("sandboxed_segfault", "*(volatile int*)(uintptr_t)16 = 1;",
                                       "#include <stdint.h>");
  const LoadResult loaded = sandboxed.load(LoadRequest{path}, kTimeoutS);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
  ScratchDir scratch("kforge-sandbox-test");
  RunRequest request;
  request.handle = loaded.handle;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("small", 8);
  request.output_path = scratch.next_file("segfault");
  create_private_file(request.output_path);
  const RunResult result = sandboxed.run(request, 60);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed) << result.message;
  EXPECT_NE(result.message.find("(worker killed by signal 11 (SIGSEGV"), std::string::npos)
      << result.message;
}

TEST(ProcessWorker, AReplacedWorkerIsAnnouncedWithHowItDied) {
  std::vector<std::string> causes;
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.on_restart = [&causes](const std::string& cause) { causes.push_back(cause); };
  ProcessWorker worker(config);
  worker.device_info();
  EXPECT_TRUE(causes.empty()) << "the first start is no restart";
  ::kill(worker.pid(), SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  worker.device_info();
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0],
            "kforge-worker cpu:0 exited between requests (killed by signal 9 (SIGKILL: Killed))");
  worker.shutdown();
  worker.device_info();
  EXPECT_EQ(causes.size(), 1u) << "a start after shutdown() is no restart";
  EXPECT_EQ(worker.spawn_count(), 3);
}

TEST(ProcessWorker, MissingBinaryIsAnErrorNamingIt) {
  ProcessWorker worker("/nonexistent/kforge-worker", "cpu", 0);
  try {
    worker.device_info();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kforge-worker"), std::string::npos);
  }
}

TEST(ProcessWorker, BadDeviceIsAnErrorCarryingTheWorkersReason) {
  ProcessWorker worker(testing::worker_path(), "cpu", 5);
  try {
    worker.device_info();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only device 0"), std::string::npos) << e.what();
  }
}

TEST(ProcessWorker, CudaWithoutADeviceFailsCleanly) {
  ProcessWorker worker(testing::worker_path(), "cuda", 0);
  try {
    EXPECT_EQ(worker.device_info().backend, "cuda");  // a machine with a GPU
  } catch (const Error& e) {
    // No GPU, or no cuda backend in this build: the worker's error says which.
    const std::string expected = kforge::testing::has_backend("cuda")
                                     ? "no CUDA device"
                                     : "the cuda backend is not in this build";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::worker

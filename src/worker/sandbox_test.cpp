// Each sandbox mechanism (bubblewrap; util-linux unshare, with bubblewrap turned off) around a
// real kforge-worker: the worker sees only its own PID namespace, holds no capabilities, still
// speaks its private protocol, and kforge's timeout kill, memory watchdog and crash report reach
// it through the extra processes. A mechanism this machine cannot run skips with its note.
#include "worker/sandbox.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>
#include <thread>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/scratch_dir.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge::worker {
namespace {

constexpr double kTimeoutS = 30.0;

Sandbox sandbox_of(const std::string& mechanism) {
  return detect_sandbox({mechanism == "bubblewrap", mechanism == "unshare"});
}

/// Process ids below `root` (its children, theirs, ...), from /proc/*/stat.
std::set<int> descendants(int root) {
  std::map<int, std::vector<int>> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    if (!std::getline(stat, text) || text.rfind(')') == std::string::npos) continue;
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string state;
    int parent = 0;
    if (fields >> state >> parent && state != "Z") children[parent].push_back(std::stoi(name));
  }
  std::set<int> found;
  std::vector<int> todo = {root};
  while (!todo.empty()) {
    const int pid = todo.back();
    todo.pop_back();
    for (int child : children[pid]) {
      if (found.insert(child).second) todo.push_back(child);
    }
  }
  return found;
}

class WorkerSandbox : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    sandbox_ = sandbox_of(GetParam());
    if (!sandbox_.available) GTEST_SKIP() << GetParam() << ": " << sandbox_.note;
  }
  ProcessWorkerConfig config() const {
    ProcessWorkerConfig config;
    config.worker_path = testing::worker_path();
    config.sandbox = sandbox_;
    return config;
  }
  /// Runs y[i] = 2 x[i] preceded by `body` (a non-zero return is the kernel's verdict).
  RunResult run(ProcessWorker& worker, const std::string& name, const std::string& body,
                const std::string& prelude, double timeout_s = kTimeoutS) {
    const std::string path = testing::build_cpu_kernel(
        "sandbox_" + name + "_" + GetParam(),
        testing::cpu_unary_kernel(body + "\n  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
                                  prelude));
    const LoadResult loaded = worker.load(LoadRequest{path}, kTimeoutS);
    EXPECT_EQ(loaded.verdict, Verdict::ok) << loaded.message;
    RunRequest request;
    request.handle = loaded.handle;
    request.signature = testing::unary_signature();
    request.workload = testing::workload_n("small", 8);
    request.output_path = scratch_.next_file(name);
    create_private_file(request.output_path);
    return worker.run(request, timeout_s);
  }
  Sandbox sandbox_;
  ScratchDir scratch_{"kforge-sandbox-test"};
};

TEST_P(WorkerSandbox, SaysWhatItIsolates) {
  EXPECT_TRUE(sandbox_.pid_namespace);
  EXPECT_NE(sandbox_.note.find("own PID namespace"), std::string::npos) << sandbox_.note;
  if (GetParam() == "unshare") {
    EXPECT_NE(sandbox_.note.find("filesystem and network are not sandboxed"), std::string::npos)
        << sandbox_.note;
  }
}

// 7: /proc lists processes beyond the sandbox's own; 8: the worker is PID 1 (where a raised
// signal without a handler is ignored); 9: a capability is left (CAP_SYS_ADMIN could unmount
// /proc); 10: /dev (the GPUs) is not visible.
TEST_P(WorkerSandbox, WorkerSeesOnlyItsNamespaceAndNoCapabilities) {
  ProcessWorker worker(config());
  const RunResult result = run(worker, "namespace", R"(
  int processes = 0;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) processes += entry->d_name[0] >= '1' && entry->d_name[0] <= '9';
    closedir(proc);
  }
  if (processes > 4) return 7;
  if (getpid() == 1) return 8;
  FILE* status = fopen("/proc/self/status", "r");
  char line[256];
  while (status && fgets(line, sizeof line, status)) {
    if (strncmp(line, "CapEff:", 7) == 0 && strtoull(line + 7, nullptr, 16) != 0) return 9;
  }
  if (status) fclose(status);
  if (access("/dev/null", R_OK | W_OK) != 0 || access("/dev/shm", W_OK) != 0) return 10;)",
                                 "#include <dirent.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                                 "#include <string.h>\n#include <unistd.h>");
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
}

TEST_P(WorkerSandbox, TimeoutKillsEveryProcessOfTheSandbox) {
  ProcessWorker worker(config());
  worker.device_info();
  const int leader = worker.pid();
  std::set<int> members;
  std::jthread watcher([&] {  // joined on every exit: a throwing run() must not terminate
    // While the kernel hangs: the wrapper, its PID 1 and the worker below the leader.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    members = descendants(leader);
  });
  const RunResult result = run(worker, "hang", "for (volatile int spin = 1; spin;) {}", "", 3.0);
  watcher.join();
  EXPECT_EQ(result.verdict, Verdict::timeout) << result.message;
  EXPECT_GE(members.size(), 2u) << "the sandbox has a PID 1 and the worker below the wrapper";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string survivors;  // a zombie waiting for its new parent to reap it is no survivor
  for (int pid : members) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (std::getline(stat, text) && text.rfind(')') != std::string::npos &&
        text.substr(text.rfind(')') + 2, 1) != "Z") {
      survivors += " " + text.substr(0, 80);
    }
  }
  EXPECT_EQ(survivors, "") << "process(es) outlived the kill";
}

TEST_P(WorkerSandbox, MemoryWatchdogSeesTheWorkerThroughTheWrapper) {
  ProcessWorkerConfig limited = config();
  limited.memory_limit_bytes = int64_t{256} << 20;
  ProcessWorker worker(limited);
  const RunResult result = run(
      worker, "hog", "for (;;) { char* p = (char*)malloc(64 << 20); if (!p) return 1; memset(p, 1, 64 << 20); }",
      "#include <stdlib.h>\n#include <string.h>", 60.0);
  EXPECT_EQ(result.verdict, Verdict::worker_crashed) << result.message;
  EXPECT_NE(result.message.find("over its limit of"), std::string::npos) << result.message;
}

TEST_P(WorkerSandbox, ARaisedSignalIsReportedByItsName) {
  // Not PID 1: abort() kills the worker with SIGABRT, which the wrapper reports as 128 + 6.
  ProcessWorker worker(config());
  const RunResult result = run(worker, "abort", "abort();", "#include <stdlib.h>");
  EXPECT_EQ(result.verdict, Verdict::worker_crashed) << result.message;
  EXPECT_NE(result.message.find("(worker killed by signal 6 (SIGABRT"), std::string::npos)
      << result.message;
}

INSTANTIATE_TEST_SUITE_P(Sandbox, WorkerSandbox, ::testing::Values("bubblewrap", "unshare"));

TEST(SandboxDetection, WithNothingAllowedTheNoteSaysProcessOnly) {
  const Sandbox none = detect_sandbox({false, false});
  EXPECT_FALSE(none.available);
  EXPECT_FALSE(none.pid_namespace);
  EXPECT_TRUE(none.argv_prefix.empty());
  EXPECT_NE(none.note.find("isolated by process only"), std::string::npos) << none.note;
  EXPECT_NE(none.note.find("/proc"), std::string::npos) << none.note;
}

// On a GPU machine: the CUDA worker starts inside each mechanism and finds its device.
class GpuWorkerSandbox : public ::testing::TestWithParam<std::string> {};
TEST_P(GpuWorkerSandbox, CudaWorkerFindsItsDevice) {
  ProcessWorker bare(testing::worker_path(), "cuda", 0);
  try {
    bare.device_info();
  } catch (const Error& e) {
    GTEST_SKIP() << "no CUDA device: " << e.what();
  }
  const Sandbox sandbox = sandbox_of(GetParam());
  if (!sandbox.available) GTEST_SKIP() << GetParam() << ": " << sandbox.note;
  ProcessWorkerConfig config;
  config.worker_path = testing::worker_path();
  config.backend = "cuda";
  config.sandbox = sandbox;
  ProcessWorker worker(config);
  EXPECT_EQ(worker.device_info().backend, "cuda");
  EXPECT_EQ(worker.device_info().name, bare.device_info().name);
}
INSTANTIATE_TEST_SUITE_P(Gpu, GpuWorkerSandbox, ::testing::Values("bubblewrap", "unshare"));

}  // namespace
}  // namespace kforge::worker

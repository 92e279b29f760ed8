// Torch reference workers forked by the fork server that `kforge suite` runs
// (cli/torch_fork_server.h, python/kforge_torch/fork_server.py, process/fork_client.h): a real
// server under this machine's sandbox, real workers answering the protocol, killed from outside
// and started again, and the fallbacks when the server cannot serve. Skips where the PyTorch
// Python cannot start the server.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/torch_fork_server.h"
#include "common/error.h"
#include "common/files.h"
#include "support/processes.h"
#include "task/torch_task.h"
#include "worker/sandbox.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

struct Server {
  std::unique_ptr<cli::TorchForkServer> server;
  std::string skip;
};

/// One server for the whole file (it imports torch: seconds), ready or skipped.
Server& server() {
  static Server* shared = [] {
    auto* s = new Server;
    std::string why;
    s->server = cli::TorchForkServer::start(&why);
    if (!s->server) {
      s->skip = "no fork server: " + why;
      return s;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fs::exists(s->server->socket_path()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!fs::exists(s->server->socket_path())) s->skip = "the fork server never listened";
    return s;
  }();
  return *shared;
}

worker::ProcessWorkerConfig reference_config() {
  worker::ProcessWorkerConfig config;
  const std::vector<std::string> command = torch_worker_command();
  config.worker_path = command.front();
  config.worker_arguments.assign(command.begin() + 1, command.end());
  config.environment = torch_environment(worker::scrubbed_environment());
  config.sandbox = worker::detect_sandbox();
  config.backend = "cpu";
  config.display_name = "torch reference worker";
  config.fork_server = server().server->socket_path();
  return config;
}

using testing::alive;
using testing::gone_within;

#define KFORGE_SERVER_OR_SKIP()                                           \
  if (!server().skip.empty()) GTEST_SKIP() << server().skip;              \
  ASSERT_TRUE(server().server != nullptr)

TEST(TorchForkServerTest, AForkedWorkerLoadsAProblemAndIsReplacedThroughTheServerWhenKilled) {
  KFORGE_SERVER_OR_SKIP();
  worker::ProcessWorker worker(reference_config());
  const worker::DeviceInfo info = worker.device_info();
  EXPECT_EQ(info.backend, "cpu");
  ASSERT_TRUE(worker.forked());
  const int first = worker.pid();
  ASSERT_GT(first, 0);
  EXPECT_TRUE(alive(first)) << "the pid from the server is this namespace's";

  // A problem loads in the forked worker as in a fresh one.
  const Task task = load_torch_task(worker::testing::source_root() +
                                    "/python/tests/problems/gelu_erf.py");
  const std::string path = worker::testing::scratch_dir() + "/fork-server-gelu.json";
  write_file_atomically(path, derived_json(task).dump());
  worker::LoadRequest load;
  load.path = path;
  const worker::LoadResult loaded = worker.load(load, 60.0);
  ASSERT_EQ(loaded.verdict, Verdict::ok) << loaded.message;

  ASSERT_EQ(::kill(first, SIGKILL), 0);  // killed from outside
  ASSERT_TRUE(gone_within(first, 10.0));
  EXPECT_EQ(worker.device_info().backend, "cpu");
  EXPECT_EQ(worker.spawn_count(), 2);
  EXPECT_TRUE(worker.forked());
  const int second = worker.pid();
  EXPECT_NE(second, first);
  worker.shutdown();
  EXPECT_TRUE(gone_within(second, 10.0));
}

TEST(TorchForkServerTest, SpawnStartsTheWorkerAndTheHelloIsReadLater) {
  KFORGE_SERVER_OR_SKIP();
  worker::ProcessWorker worker(reference_config());
  worker.spawn();
  EXPECT_GT(worker.pid(), 0);
  EXPECT_EQ(worker.spawn_count(), 1);
  EXPECT_EQ(worker.device_info().backend, "cpu");
  EXPECT_EQ(worker.spawn_count(), 1) << "the hello of the spawned process, not a second start";
}

/// A worker of `config` starts and answers, not forked.
void expect_started_on_its_own(const worker::ProcessWorkerConfig& config) {
  worker::ProcessWorker worker(config);
  EXPECT_EQ(worker.device_info().backend, "cpu");
  EXPECT_FALSE(worker.forked());
}

TEST(TorchForkServerTest, AWorkerInAnotherEnvironmentStartsOnItsOwn) {
  KFORGE_SERVER_OR_SKIP();
  worker::ProcessWorkerConfig config = reference_config();
  config.environment->push_back("KFORGE_FORK_TEST_OTHER=1");
  expect_started_on_its_own(config);
}

TEST(TorchForkServerTest, WithNoServerAtTheSocketTheWorkerStartsOnItsOwn) {
  KFORGE_SERVER_OR_SKIP();
  worker::ProcessWorkerConfig config = reference_config();
  config.fork_server = worker::testing::scratch_dir() + "/no-such-fork-server";
  expect_started_on_its_own(config);
}

TEST(TorchForkServerTest, AForkedWorkerThatCannotStartIsStartedOnItsOwnOnce) {
  KFORGE_SERVER_OR_SKIP();
  worker::ProcessWorkerConfig config = reference_config();
  config.device_index = 1;  // the cpu backend has only device 0: forked or not, the start fails
  worker::ProcessWorker worker(config);
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(worker.device_info(), Error);
  const std::string notes = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(notes.find("forked by the server"), std::string::npos) << notes;
  EXPECT_NE(notes.find("starting it on its own"), std::string::npos) << notes;
  EXPECT_EQ(worker.spawn_count(), 2) << "one forked, then one started on its own";
  EXPECT_THROW(worker.device_info(), Error);
  EXPECT_EQ(worker.spawn_count(), 3) << "no fork again once one failed";
}

TEST(TorchForkServerTest, TheServerSaysWhereItsSocketIsToLaterProcesses) {
  KFORGE_SERVER_OR_SKIP();
  EXPECT_EQ(cli::torch_fork_server_socket(), server().server->socket_path());
}

}  // namespace
}  // namespace kforge

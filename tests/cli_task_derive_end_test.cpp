// A PyTorch problem's derivation runs the module's own code in a Python child of kforge, in its
// own process group (a terminal's Ctrl-C reaches kforge only). Whatever ends kforge (Ctrl-C,
// SIGTERM, SIGKILL), the child must end with it, even inside a forward that never returns:
// it watches its stdin, a pipe only kforge holds (derive --end-at-stdin-eof).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process/subprocess.h"
#include "support/cli_case.h"
#include "support/processes.h"
#include "support/test_python.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kEndlessForward = R"(import torch
import torch.nn as nn

N = 64


class Model(nn.Module):
    def forward(self, x):
        while True:
            pass


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
)";

using testing::alive;
using testing::gone_within;
using testing::processes_with;

class CliTaskDeriveEndTest : public testing::CliCase {
 protected:
  CliTaskDeriveEndTest() : CliCase("kforge_cli_derive_end_") {}
};

TEST_F(CliTaskDeriveEndTest, AnEndlessForwardsDerivationEndsWhenKforgeIsKilled) {
  const fs::path problem = write("endless_forward.py", kEndlessForward);
  for (int signal_number : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE("kforge ended by signal " + std::to_string(signal_number));
    process::SpawnOptions spawn;
    spawn.argv = {"env", "KFORGE_PYTHON=" + kforge::testing::test_python(), KFORGE_CLI_PATH,
                  "task", problem.string()};
    spawn.pipe_stdin = false;
    spawn.merge_stderr = true;
    process::Subprocess kforge(spawn);
    // The derivation's child appears once kforge has found the Python.
    std::vector<int> derive;
    const Clock::time_point start = Clock::now();
    while (derive.empty() && Clock::now() - start < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      derive = processes_with("kforge_torch", problem.string());
    }
    ASSERT_EQ(derive.size(), 1u) << "no derivation child seen: " << kforge.take_stdout();
    std::this_thread::sleep_for(std::chrono::seconds(2));  // well inside forward's loop
    ASSERT_TRUE(alive(derive[0]));
    // Only kforge (the env process execs it) gets the signal, as from `kill PID`.
    ASSERT_EQ(::kill(kforge.pid(), signal_number), 0);
    ASSERT_TRUE(kforge.wait(30)) << "kforge did not end";
    if (!gone_within(derive[0], 15.0)) {
      ADD_FAILURE() << "the derivation outlived kforge by 15 s";
      ::kill(derive[0], SIGKILL);
    }
  }
}

}  // namespace
}  // namespace kforge

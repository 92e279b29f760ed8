#include "cli/torch_fork_server.h"

#include <cstdlib>
#include <filesystem>

#include "common/scratch_dir.h"
#include "process/subprocess.h"
#include "task/torch_task.h"
#include "worker/sandbox.h"
#include "worker/worker_client.h"

namespace kforge::cli {
namespace fs = std::filesystem;

struct TorchForkServer::State {
  std::unique_ptr<ScratchDir> scratch;
  std::string socket_path;
  std::unique_ptr<process::Subprocess> process;
  bool ready = false;
};

std::string torch_fork_server_socket() {
  const char* value = std::getenv(kTorchForkServerVariable);
  if (value == nullptr || *value == '\0' || std::string(value) == "off") return "";
  return value;
}

std::unique_ptr<TorchForkServer> TorchForkServer::start(std::string* why_not) {
  auto refuse = [&](const std::string& why) -> std::unique_ptr<TorchForkServer> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  if (const char* value = std::getenv(kTorchForkServerVariable);
      value != nullptr && std::string(value) == "off") {
    return refuse(std::string(kTorchForkServerVariable) + "=off");
  }
  auto state = std::make_unique<State>();
  try {
    state->scratch = std::make_unique<ScratchDir>("kforge-fork-server");
    state->socket_path = (fs::path(state->scratch->path()) / "socket").string();
    // sockaddr_un's path holds 107 bytes and a NUL.
    if (state->socket_path.size() >= 108) {
      return refuse("the socket path " + state->socket_path + " is longer than 107 bytes");
    }
    // The sandbox and environment of a torch reference worker (cli/worker_setup.cpp): the
    // server forks its workers inside both, and refuses a request made for others.
    const worker::Sandbox sandbox = worker::detect_sandbox();
    process::SpawnOptions spawn;
    if (sandbox.available) spawn.argv = sandbox.argv_prefix;
    for (const std::string& arg :
         {torch_python(), std::string("-m"), std::string("kforge_torch"),
          std::string("fork-server"), std::string("--socket"), state->socket_path,
          std::string("--sandbox"), sandbox.available ? sandbox.mechanism : std::string()}) {
      spawn.argv.push_back(arg);
    }
    spawn.environment = torch_environment(worker::scrubbed_environment());
    spawn.pipe_stdin = true;  // the server ends at EOF: when this process ends, it does
    state->process = std::make_unique<process::Subprocess>(spawn);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  ::setenv(kTorchForkServerVariable, state->socket_path.c_str(), 1);
  return std::unique_ptr<TorchForkServer>(new TorchForkServer(std::move(state)));
}

TorchForkServer::TorchForkServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

TorchForkServer::~TorchForkServer() {
  ::unsetenv(kTorchForkServerVariable);
  // EOF on its stdin: the server kills the workers it forked, removes its socket and exits.
  state_->process->close_stdin();
  constexpr double kStopS = 5.0;
  if (!state_->process->wait(kStopS)) state_->process->kill();
}

const std::string& TorchForkServer::socket_path() const { return state_->socket_path; }

bool TorchForkServer::wait_ready(double timeout_s, std::string* why_not) {
  if (state_->ready) return true;
  std::string line;
  const process::ReadStatus status = state_->process->read_line(&line, timeout_s);
  if (status == process::ReadStatus::line && line == "ready") {
    state_->ready = true;
    return true;
  }
  ::unsetenv(kTorchForkServerVariable);
  if (why_not) {
    const std::string tail = state_->process->stderr_tail();
    *why_not = status == process::ReadStatus::timeout
                   ? "the fork server was not ready within " + std::to_string(timeout_s) + " s"
                   : "the fork server ended" + (tail.empty() ? std::string() : ": " + tail);
  }
  return false;
}

}  // namespace kforge::cli

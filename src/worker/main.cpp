// kforge-worker: a disposable process that owns one device and runs candidate kernels for the
// orchestrator, speaking the line protocol of worker/protocol.h on its stdin/stdout.
//
//   kforge-worker --backend cpu|cuda [--device N]
//
// Exit codes: 0 after shutdown or EOF, kWorkerExitHarnessError when it cannot start (no device),
// kWorkerExitUsage for a bad command line, kWorkerExitDeviceLost after a sticky device error.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "backends/backend.h"
#include "worker/server.h"

namespace {

int run_worker(const std::string& backend_name, int device_index) {
  using namespace kforge::worker;
  try {
    const Channels channels = take_private_channels();
    Server server(kforge::backends::make_device_backend(backend_name, device_index));
    return server.serve(channels);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge-worker: error: %s\n", e.what());
    return kWorkerExitHarnessError;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kforge-worker: runs candidate kernels on one device for the kforge orchestrator"};
  std::string backend;
  int device_index = 0;
  app.add_option("--backend", backend, "where kernels run")
      ->required()
      ->check(CLI::IsMember(kforge::backends::known_backend_names()))
      ->envname("KFORGE_WORKER_BACKEND");
  app.add_option("--device", device_index, "device index (cuda) or 0 (cpu)")
      ->check(CLI::NonNegativeNumber)
      ->envname("KFORGE_WORKER_DEVICE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kforge::worker::kWorkerExitUsage;
  }
  // A crashing candidate must not leave a core file (gigabytes with a CUDA context) in the
  // orchestrator's directory, nor make the client wait while one is written.
  const rlimit no_core_files{0, 0};
  setrlimit(RLIMIT_CORE, &no_core_files);
  const int code = run_worker(backend, device_index);
  // Leave without running static destructors or atexit handlers a candidate may have installed:
  // they are not ours to run, and a crash there would blur the exit code.
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

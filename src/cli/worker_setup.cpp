#include "cli/worker_setup.h"

#include <cstdlib>
#include <filesystem>

#include "cli/torch_fork_server.h"
#include "common/paths.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

WorkerConfigs worker_configs(const Task& task, const std::string& backend, int device) {
  WorkerConfigs configs;
  worker::ProcessWorkerConfig& candidate = configs.candidate;
  candidate.worker_path = worker_binary_path();
  candidate.backend = backend;
  candidate.device_index = device;
  candidate.sandbox = worker::detect_sandbox();
  configs.reference = candidate;
  worker::ProcessWorkerConfig& reference = configs.reference;
  reference.measure_device = true;
  if (task.has_torch_reference()) {
    // The reference is the user's PyTorch module, run by kforge's Python worker on the same
    // device; candidates still run in kforge-worker.
    std::vector<std::string> command = torch_worker_command();
    reference.worker_path = command.front();
    reference.worker_arguments.assign(command.begin() + 1, command.end());
    reference.environment = torch_environment(worker::scrubbed_environment());
    reference.display_name = "torch reference worker";
    reference.fork_server = torch_fork_server_socket();  // set by `kforge suite`
    const std::vector<std::string> python = torch_candidate_worker_command();
    worker::ProcessWorkerConfig& candidate_python = configs.python_candidate;
    candidate_python = candidate;
    candidate_python.worker_path = python.front();
    candidate_python.worker_arguments.assign(python.begin() + 1, python.end());
    // Where Triton caches its builds, when the user chose (else the worker picks a folder under
    // $TMPDIR, writable in the sandbox: candidate_worker.build_folders).
    std::vector<std::string> python_environment = worker::scrubbed_environment();
    if (const char* value = std::getenv("TRITON_CACHE_DIR"); value != nullptr && *value != '\0') {
      python_environment.push_back(std::string("TRITON_CACHE_DIR=") + value);
    }
    candidate_python.environment = torch_environment(std::move(python_environment));
    // load_inline builds under kforge's artifact cache, a folder per candidate source
    // (python/kforge_torch/candidate.py extensions_dir): cached by content like native builds.
    // Under bubblewrap the filesystem is read-only but for the scratch areas, so that folder is
    // bound writable too (made first: bwrap binds only what exists).
    const std::string extensions = (fs::path(artifact_cache_dir()) / "torch_extensions").string();
    candidate_python.environment->push_back("KFORGE_TORCH_EXTENSIONS_ROOT=" + extensions);
    if (candidate_python.sandbox.mechanism == "bubblewrap") {
      std::error_code ec;
      fs::create_directories(extensions, ec);
      if (!ec) {
        candidate_python.sandbox.argv_prefix.insert(candidate_python.sandbox.argv_prefix.end(),
                                                    {"--bind", extensions, extensions});
      }
    }
    candidate_python.display_name = "python candidate worker";
  }
  return configs;
}

}  // namespace kforge::cli

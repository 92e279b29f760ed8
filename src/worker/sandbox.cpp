#include "worker/sandbox.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>

#include "compile/toolchain_compiler.h"
#include "process/subprocess.h"

namespace kforge::worker {

Sandbox detect_sandbox() {
  Sandbox sandbox;
  const std::string bwrap = compile::find_on_path("bwrap");
  if (bwrap.empty()) {
    sandbox.note =
        "bubblewrap (bwrap) is not installed: workers run isolated by process only, with the "
        "filesystem and network not sandboxed (install the 'bubblewrap' package to sandbox them)";
    return sandbox;
  }
  std::vector<std::string> prefix = {bwrap,        "--ro-bind",    "/",        "/",
                                     "--dev-bind", "/dev",         "/dev",     "--proc",
                                     "/proc",      "--unshare-net", "--die-with-parent"};
  std::vector<std::string> writable;
  if (::access("/dev/shm", W_OK) == 0) writable.push_back("/dev/shm");
  const char* tmp = std::getenv("TMPDIR");
  writable.push_back(tmp && *tmp ? tmp : "/tmp");
  for (const std::string& path : writable) {
    prefix.insert(prefix.end(), {"--bind", path, path});
  }
  std::vector<std::string> trial = prefix;
  trial.push_back("true");
  try {
    const process::CommandResult result = process::run_command(trial, 10.0);
    if (!result.succeeded()) {
      sandbox.note = "bubblewrap is installed but cannot start a sandbox here (" +
                     result.output.substr(0, 200) +
                     "): workers run isolated by process only, filesystem and network not "
                     "sandboxed";
      return sandbox;
    }
  } catch (const std::exception& e) {
    sandbox.note = std::string("bubblewrap could not be run (") + e.what() +
                   "): workers run isolated by process only";
    return sandbox;
  }
  sandbox.available = true;
  sandbox.argv_prefix = std::move(prefix);
  sandbox.note = "workers run in bubblewrap: read-only filesystem except /dev/shm and the temp "
                 "directory, no network";
  return sandbox;
}

}  // namespace kforge::worker

#include "worker/sandbox.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>

#include "common/files.h"
#include "process/subprocess.h"

namespace kforge::worker {
namespace {

/// Passes inside a working sandbox: /proc lists at most 4 processes (PID 1, the shell, its
/// subshells), no capability is permitted and none can be regained on exec (no_new_privs): with
/// CAP_SYS_ADMIN a worker could unmount its /proc and find the host's below it.
constexpr const char* kTrialScript =
    "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; "
    "if [ \"$n\" -gt 4 ]; then echo \"/proc shows $n processes\"; exit 1; fi; "
    "if ! grep -q '^CapPrm:[[:space:]]*0*$' /proc/self/status || "
    "! grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status; then "
    "echo \"capabilities kept: $(grep -E '^(CapPrm|NoNewPrivs)' /proc/self/status | "
    "tr '\\n' ' ')\"; exit 1; fi";

/// Runs the trial inside `prefix`: "" when it passed, else what went wrong.
std::string trial_failure(const std::vector<std::string>& prefix) {
  std::vector<std::string> trial = prefix;
  trial.insert(trial.end(), {"/bin/sh", "-c", kTrialScript});
  try {
    const process::CommandResult result = process::run_command(trial, 10.0);
    if (result.succeeded()) return "";
    std::string output = result.output.substr(0, 200);
    while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
    if (result.timed_out) return "its trial run did not finish in 10 s";
    return output.empty() ? "its trial run failed with exit code " + std::to_string(result.exit_code)
                          : output;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<std::string> bubblewrap_prefix(const std::string& bwrap) {
  // --cap-drop ALL: bwrap run as root keeps root's capabilities otherwise.
  std::vector<std::string> prefix = {bwrap,          "--ro-bind",    "/",         "/",
                                     "--dev-bind",   "/dev",         "/dev",      "--proc",
                                     "/proc",        "--unshare-net", "--unshare-pid",
                                     "--die-with-parent", "--cap-drop", "ALL"};
  std::vector<std::string> writable;
  if (::access("/dev/shm", W_OK) == 0) writable.push_back("/dev/shm");
  const char* tmp = std::getenv("TMPDIR");
  writable.push_back(tmp && *tmp ? tmp : "/tmp");
  for (const std::string& path : writable) {
    prefix.insert(prefix.end(), {"--bind", path, path});
  }
  return prefix;
}

/// unshare [--user --map-root-user] --pid --fork --mount-proc --kill-child, setpriv with no
/// capabilities, then a shell as the namespace's PID 1 so that the worker is not (PID 1 ignores
/// the signals it has no handler for, a candidate's abort() included).
std::vector<std::string> unshare_prefix(const std::string& unshare, const std::string& setpriv,
                                        bool user_namespace) {
  std::vector<std::string> prefix = {unshare};
  if (user_namespace) prefix.insert(prefix.end(), {"--user", "--map-root-user"});
  prefix.insert(prefix.end(), {"--pid", "--fork", "--mount-proc", "--kill-child", "--", setpriv,
                               "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--",
                               "/bin/sh", "-c", "\"$@\"; exit $?", "kforge-sandbox"});
  return prefix;
}

}  // namespace

Sandbox detect_sandbox(const SandboxSearch& search) {
  Sandbox sandbox;
  std::vector<std::string> refusals;
  if (search.bubblewrap) {
    if (const std::string bwrap = find_on_path("bwrap"); bwrap.empty()) {
      refusals.push_back("bubblewrap (bwrap) is not installed");
    } else if (std::string why = trial_failure(bubblewrap_prefix(bwrap)); !why.empty()) {
      refusals.push_back("bubblewrap cannot start a sandbox here (" + why + ")");
    } else {
      sandbox.available = sandbox.pid_namespace = true;
      sandbox.mechanism = "bubblewrap";
      sandbox.argv_prefix = bubblewrap_prefix(bwrap);
      sandbox.note =
          "workers run in bubblewrap: own PID namespace and /proc (kforge's environment and "
          "memory out of reach), read-only filesystem except /dev/shm and the temp directory, "
          "no network, no capabilities";
      return sandbox;
    }
  }
  if (search.unshare) {
    const std::string unshare = find_on_path("unshare");
    const std::string setpriv = find_on_path("setpriv");
    if (unshare.empty() || setpriv.empty()) {
      refusals.push_back("util-linux unshare and setpriv are not both installed");
    } else {
      for (const bool user_namespace : {false, true}) {
        const std::vector<std::string> prefix = unshare_prefix(unshare, setpriv, user_namespace);
        const std::string how = user_namespace ? "unshare --user" : "unshare";
        if (std::string why = trial_failure(prefix); !why.empty()) {
          refusals.push_back(how + " cannot isolate a worker here (" + why + ")");
          continue;
        }
        sandbox.available = sandbox.pid_namespace = true;
        sandbox.mechanism = how;
        sandbox.argv_prefix = prefix;
        std::string note = "workers run in their own PID namespace and /proc (" + how +
                           "; kforge's environment and memory out of reach) with no "
                           "capabilities, but the filesystem and network are not sandboxed";
        if (!refusals.empty()) note += " (" + refusals.front() + ")";
        sandbox.note = note + "; install the 'bubblewrap' package for those";
        return sandbox;
      }
    }
  }
  std::string note = "workers run isolated by process only: they can read other processes' "
                     "/proc (kforge's environment included), and the filesystem and network are "
                     "not sandboxed";
  for (const std::string& refusal : refusals) note += "; " + refusal;
  sandbox.note = note + " (install the 'bubblewrap' package to sandbox them)";
  return sandbox;
}

}  // namespace kforge::worker

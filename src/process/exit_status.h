// How a process ended (process::Subprocess, process::fork_from_server).
#pragma once

#include <string>

namespace kforge::process {

/// How a process ended: a normal exit with a code, or death by a signal.
struct ExitStatus {
  bool exited = false;  // true: exit_code is valid; false: killed by `signal`
  int exit_code = -1;
  int signal = 0;
  /// "exit code 3" or "killed by signal 11 (SIGSEGV: Segmentation fault)".
  std::string describe() const;
};

/// The status of the command a wrapper ran, for wrappers that exit with 128 + N when their
/// command was killed by signal N (bubblewrap, sh): such an exit (N in 1..64) becomes a death by
/// signal N; any other status is returned unchanged.
ExitStatus unwrap_signal_exit(const ExitStatus& wrapper);

}  // namespace kforge::process

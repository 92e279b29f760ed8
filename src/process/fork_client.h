// The client side of a fork server (python/kforge_torch/fork_server.py): a process that imported
// PyTorch once and forks a reference worker per request, so that a worker's start costs its
// device context rather than `import torch` as well (the idea of Python multiprocessing's
// "forkserver" start method).
//
// One Unix stream connection per child. The request is one JSON line plus the child's stdin,
// stdout and stderr (SCM_RIGHTS); the answer is {"refused": why}, or the child's own {"pid": n}
// line whose SCM_CREDENTIALS give its pid in this process's PID namespace (the server may run in
// a sandbox's namespace of its own), later followed by the server's {"exit": code} or
// {"signal": n} once the child has ended and been reaped. Writing "kill" (or closing the
// connection) makes the server kill the child's process group: only the server reaps the child,
// so only it can kill the group without racing a reuse of its id.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "process/exit_status.h"

namespace kforge::process {

/// What Subprocess asks a fork server for (SpawnOptions::fork_server).
struct ForkRequest {
  std::string socket_path;           // the server's socket; empty = no server
  std::vector<std::string> argv;     // what follows the interpreter: {"-m", "kforge_torch", ...}
  std::vector<std::string> environment;  // the child's whole environment ("NAME=value")
  std::string cwd;                   // the child's working folder; empty = this process's
  std::string sandbox;               // the sandbox mechanism the child must run under ("" none)
};

/// A child the server started: its pid here and the connection that reports its end.
struct ForkedChild {
  pid_t pid = -1;
  int connection = -1;  // owned by the caller: close it when done (the server kills the group)
};

/// Asks the server at request.socket_path for a child whose stdin, stdout and stderr are the
/// given descriptors (duplicated into it; the caller still owns them). Waits at most `timeout_s`
/// for the child's first line. Returns nullopt, with *why_not saying why, when there is no
/// server, it refuses (another environment, sandbox or command), or the child ended before it
/// started; never throws.
std::optional<ForkedChild> fork_from_server(const ForkRequest& request, int stdin_fd,
                                            int stdout_fd, int stderr_fd, double timeout_s,
                                            std::string* why_not);

/// True when the connection has something to read (the child's end, or the server gone).
bool fork_end_ready(int connection);

/// Reads how the child ended from its connection, waiting up to `timeout_s`. nullopt at the
/// deadline; a connection closed without an answer (the server died) is reported as a death by
/// SIGKILL with *server_gone set.
std::optional<ExitStatus> read_fork_end(int connection, double timeout_s, bool* server_gone);

/// Asks the server to kill the child's process group (best effort: a dead server cannot).
void request_fork_kill(int connection);

}  // namespace kforge::process

// One passive subprocess object and one poll loop (after ninja's src/subprocess-posix.cc).
//
// A Subprocess is spawned with posix_spawn in its own process group, with pipes for stdin and
// stdout, stderr captured into a bounded ring (or merged into stdout), and no descriptor of the
// parent other than 0/1/2 (closefrom in the child). It never runs anything on its own: the owner
// drives it with write_line / read_line / wait, each bounded by a timeout, and kill() ends the
// whole process group with SIGKILL and reaps the leader. The destructor kills and reaps what is
// still running, so no zombie and no stray group member outlives the object.
//
// Not thread-safe: one owner thread per object.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/exit_status.h"
#include "process/fork_client.h"

namespace kforge::process {

struct SpawnOptions {
  /// Program and arguments; argv[0] without a '/' is searched in $PATH.
  std::vector<std::string> argv;
  /// Replaces the whole environment ("NAME=value" entries) when set; else inherited.
  std::optional<std::vector<std::string>> environment;
  /// Working directory of the child; empty keeps the parent's.
  std::string cwd;
  /// false: stdin is /dev/null and write_line is unavailable.
  bool pipe_stdin = true;
  /// true: stderr goes into the stdout pipe (interleaved as written); else into the ring.
  bool merge_stderr = false;
  /// Size of the stderr ring: only the last this-many bytes are kept.
  size_t stderr_tail_bytes = 8192;
  /// Stdout bytes buffered but not yet consumed beyond this are dropped (see stdout_truncated()).
  size_t max_stdout_bytes = size_t{64} << 20;
  /// When set, the process is first asked of this fork server (process/fork_client.h), which
  /// forks it from a process that has its imports done; argv and environment above are what
  /// runs instead when the server is absent or refuses. The child is then not ours to wait for:
  /// its end comes from the server's connection, and kill() asks the server to kill its group.
  std::optional<ForkRequest> fork_server;
};

/// Outcome of read_line.
enum class ReadStatus { line, eof, timeout, overflow };

class Subprocess {
 public:
  /// Starts the process. Throws Error naming argv[0] when it cannot be executed (not found, not
  /// executable) or when pipes cannot be made.
  explicit Subprocess(const SpawnOptions& options);
  /// Kills the process group and reaps the leader if still running.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  /// True when a fork server started the process (SpawnOptions::fork_server).
  bool forked() const { return forked_; }
  /// Why a requested fork server did not start it (empty when it did, or none was asked).
  const std::string& fork_refusal() const { return fork_refusal_; }

  /// Writes `line` plus '\n' to the child's stdin, waiting at most `timeout_s` seconds for pipe
  /// space. Returns false if the child closed its stdin (EPIPE, SIGPIPE is suppressed) or the
  /// deadline passed; the caller then treats the child as dead or hung.
  bool write_line(std::string_view line, double timeout_s);
  /// Closes the child's stdin (it reads EOF).
  void close_stdin();

  /// Reads one line from stdout (without the '\n') within `timeout_s` seconds, draining stderr
  /// into the ring meanwhile. `eof`: stdout closed before a full line (a partial line is
  /// discarded); `overflow`: a line longer than max_stdout_bytes.
  ReadStatus read_line(std::string* line, double timeout_s);

  /// Waits up to `timeout_s` seconds for the leader to exit while draining both pipes (stdout
  /// into the buffer, stderr into the ring). On exit the rest of the group is killed and the
  /// leader reaped. Returns nullopt if still running at the deadline.
  std::optional<ExitStatus> wait(double timeout_s);
  /// Non-blocking: the exit status if the leader has exited (then reaped as in wait()).
  std::optional<ExitStatus> poll_exit() { return wait(0.0); }

  /// SIGKILL to the whole process group, then reaps the leader (blocking). Idempotent; returns
  /// the status of the leader.
  ExitStatus kill();

  /// Stdout read so far and not yet consumed by read_line; clears the buffer.
  std::string take_stdout();
  bool stdout_truncated() const { return stdout_truncated_; }
  /// The last stderr_tail_bytes bytes of stderr (empty when merged into stdout).
  std::string stderr_tail() const;

  /// Exit status once reaped.
  const std::optional<ExitStatus>& exit_status() const { return status_; }

 private:
  /// Polls the pipes (and the pidfd) for up to `timeout_ms`, draining what is readable.
  /// Returns true if the leader has exited.
  bool pump(int timeout_ms);
  void drain(int* fd, bool is_stdout);
  void append_stdout(const char* data, size_t size);
  void append_stderr(const char* data, size_t size);
  void reap(bool kill_first);
  /// Closes the child's ends of the pipes and keeps ours, non-blocking.
  void keep_parent_ends(const int in[2], const int out[2], const int err[2]);
  /// Starts the process through options_.fork_server; false (fork_refusal_ says why) when it
  /// did not, having left nothing open.
  bool spawn_forked(int stdin_fd, int stdout_fd, int stderr_fd);
  void close_fd(int* fd);

  SpawnOptions options_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int pidfd_ = -1;  // readable once the leader exits; -1 where pidfd_open is unavailable
  int server_fd_ = -1;  // a forked process's connection to its fork server; -1 otherwise
  bool forked_ = false;
  std::string fork_refusal_;
  std::string stdout_buffer_;
  bool stdout_truncated_ = false;
  std::string stderr_ring_;  // circular buffer of stderr_tail_bytes
  size_t stderr_next_ = 0;   // where the next stderr byte goes once the ring is full
  std::optional<ExitStatus> status_;
};

/// Result of run_command.
struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  int signal = 0;      // signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string output;  // stdout and stderr interleaved (truncated past 16 MiB, noted)
  double duration_s = 0.0;
  bool succeeded() const { return exit_code == 0 && !timed_out; }
};

/// Runs argv to completion with stdin at /dev/null, in `cwd` (empty: the current directory),
/// killing its process group after `timeout_s` seconds. Used for compilers (g++, nvcc).
/// Throws Error naming argv[0] if it cannot be executed at all; a non-zero exit is a result.
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          const std::string& cwd = "");

}  // namespace kforge::process

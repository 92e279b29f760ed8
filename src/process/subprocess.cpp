#include "process/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"

extern char** environ;

namespace kforge::process {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double timeout_s) {
  // Clamp so that "forever" style timeouts do not overflow the clock's representation.
  const double clamped_s = std::clamp(timeout_s, 0.0, 1e7);
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(clamped_s));
}

/// Milliseconds left until `deadline`, rounded up so that a poll never wakes just early.
int ms_until(Clock::time_point deadline) {
  const double left_ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
  if (left_ms <= 0) return 0;
  return static_cast<int>(std::min(std::ceil(left_ms), 1e9));
}

std::string errno_text(int error) { return std::strerror(error); }

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// Blocks SIGPIPE in this thread for its lifetime, so a write to a dead child returns EPIPE
/// instead of killing the orchestrator; a SIGPIPE raised meanwhile is consumed.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      const timespec zero{};
      while (sigtimedwait(&set_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t set_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

ExitStatus decode_wait_status(int status) {
  ExitStatus result;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

/// Spawn attributes: own process group, empty signal mask, default dispositions for the signals a
/// parent commonly ignores or handles (an ignored SIGPIPE would otherwise be inherited).
struct SpawnAttributes {
  posix_spawnattr_t attr{};
  SpawnAttributes() {
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t mask;
    sigemptyset(&mask);
    posix_spawnattr_setsigmask(&attr, &mask);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig :
         {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2}) {
      sigaddset(&defaults, sig);
    }
    posix_spawnattr_setsigdefault(&attr, &defaults);
  }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr); }
};

struct FileActions {
  posix_spawn_file_actions_t actions{};
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
};

void make_pipe(int fds[2], const std::string& program) {
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw Error("cannot create a pipe for '" + program + "': " + errno_text(errno));
  }
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit code " + std::to_string(exit_code);
  const char* abbreviation = sigabbrev_np(signal);  // "SEGV"; null for an unknown number
  const char* text = strsignal(signal);
  return "killed by signal " + std::to_string(signal) + " (" +
         (abbreviation ? "SIG" + std::string(abbreviation) + ": " : std::string()) +
         (text ? text : "?") + ")";
}

ExitStatus unwrap_signal_exit(const ExitStatus& wrapper) {
  // 64: the highest real-time signal on Linux; shells use larger codes for other things.
  constexpr int kSignalExitBase = 128, kMaxSignal = 64;
  if (!wrapper.exited || wrapper.exit_code <= kSignalExitBase ||
      wrapper.exit_code > kSignalExitBase + kMaxSignal) {
    return wrapper;
  }
  ExitStatus command;
  command.exited = false;
  command.signal = wrapper.exit_code - kSignalExitBase;
  return command;
}

Subprocess::Subprocess(const SpawnOptions& options) : options_(options) {
  if (options_.argv.empty()) throw Error("cannot spawn a process: empty argv");
  const std::string& program = options_.argv[0];
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  FileActions files;
  if (options_.pipe_stdin) {
    make_pipe(in, program);
    posix_spawn_file_actions_adddup2(&files.actions, in[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&files.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  make_pipe(out, program);
  posix_spawn_file_actions_adddup2(&files.actions, out[1], 1);
  if (options_.merge_stderr) {
    posix_spawn_file_actions_adddup2(&files.actions, out[1], 2);
  } else {
    make_pipe(err, program);
    posix_spawn_file_actions_adddup2(&files.actions, err[1], 2);
  }
  if (options_.fork_server) {
    int null_in = -1;
    if (!options_.pipe_stdin) null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const bool forked = spawn_forked(options_.pipe_stdin ? in[0] : null_in, out[1],
                                     options_.merge_stderr ? out[1] : err[1]);
    if (null_in >= 0) ::close(null_in);
    if (forked) {
      keep_parent_ends(in, out, err);
      return;
    }
  }
  if (!options_.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&files.actions, options_.cwd.c_str());
  }
  // No descriptor of ours beyond 0/1/2 reaches the child, CLOEXEC or not.
  posix_spawn_file_actions_addclosefrom_np(&files.actions, 3);

  std::vector<char*> argv;
  for (const std::string& arg : options_.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options_.environment) {
    for (const std::string& entry : *options_.environment) {
      envp.push_back(const_cast<char*>(entry.c_str()));
    }
    envp.push_back(nullptr);
  }
  SpawnAttributes attributes;
  const int rc = posix_spawnp(&pid_, program.c_str(), &files.actions, &attributes.attr, argv.data(),
                              options_.environment ? envp.data() : environ);
  keep_parent_ends(in, out, err);
  if (rc != 0) {
    pid_ = -1;
    close_fd(&stdin_fd_);
    close_fd(&stdout_fd_);
    close_fd(&stderr_fd_);
    std::string where = options_.cwd.empty() ? "" : " in '" + options_.cwd + "'";
    throw Error("cannot run '" + program + "'" + where + ": " + errno_text(rc));
  }
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // -1 on old kernels: we poll
}

void Subprocess::keep_parent_ends(const int in[2], const int out[2], const int err[2]) {
  for (int fd : {in[0], out[1], err[1]}) {  // the child's ends: it has its own copies now
    if (fd >= 0) ::close(fd);
  }
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_}) {
    if (fd >= 0) set_nonblocking(fd);
  }
}

bool Subprocess::spawn_forked(int stdin_fd, int stdout_fd, int stderr_fd) {
  ForkRequest request = *options_.fork_server;
  if (request.cwd.empty()) request.cwd = options_.cwd;
  if (options_.environment) request.environment = *options_.environment;
  // The server's own imports took seconds; its fork and the child's first line take
  // milliseconds unless it is busy (it serves one request at a time).
  constexpr double kForkAnswerS = 10.0;
  std::optional<ForkedChild> child =
      fork_from_server(request, stdin_fd, stdout_fd, stderr_fd, kForkAnswerS, &fork_refusal_);
  if (!child) return false;
  pid_ = child->pid;
  server_fd_ = child->connection;
  forked_ = true;
  return true;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) reap(true);
  close_fd(&stdin_fd_);
  close_fd(&stdout_fd_);
  close_fd(&stderr_fd_);
  close_fd(&pidfd_);
  close_fd(&server_fd_);
}

void Subprocess::close_fd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

bool Subprocess::write_line(std::string_view line, double timeout_s) {
  if (stdin_fd_ < 0) return false;
  std::string data(line);
  data.push_back('\n');
  const auto deadline = deadline_after(timeout_s);
  SigpipeGuard guard;
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(stdin_fd_, data.data() + written, data.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;  // EPIPE: the child closed its stdin
    const int left_ms = ms_until(deadline);
    if (left_ms == 0) return false;
    pollfd pfd{stdin_fd_, POLLOUT, 0};
    ::poll(&pfd, 1, left_ms);
    pump(0);  // keep the child's stdout/stderr flowing so it can make progress reading
  }
  return true;
}

void Subprocess::close_stdin() { close_fd(&stdin_fd_); }

bool Subprocess::pump(int timeout_ms) {
  nfds_t count = 0;
  pollfd fds[4];
  for (int fd : {stdout_fd_, stderr_fd_, pidfd_, server_fd_}) {
    if (fd >= 0) fds[count++] = pollfd{fd, POLLIN, 0};
  }
  // Without a pidfd (or a fork server's connection) the caller's exit check runs at least
  // every 10 ms.
  if (pidfd_ < 0 && server_fd_ < 0) timeout_ms = std::min(timeout_ms, 10);
  const int ready = ::poll(fds, count, timeout_ms);
  if (ready <= 0) return false;
  bool leader_exited = false;
  for (nfds_t i = 0; i < count; ++i) {
    const pollfd& fd = fds[i];
    if (fd.revents == 0) continue;
    if (fd.fd == pidfd_ || fd.fd == server_fd_) {
      leader_exited = true;
    } else {
      drain(fd.fd == stdout_fd_ ? &stdout_fd_ : &stderr_fd_, fd.fd == stdout_fd_);
    }
  }
  return leader_exited;
}

void Subprocess::drain(int* fd, bool is_stdout) {
  char chunk[65536];
  while (*fd >= 0) {
    const ssize_t n = ::read(*fd, chunk, sizeof chunk);
    if (n > 0) {
      if (is_stdout) {
        append_stdout(chunk, static_cast<size_t>(n));
      } else {
        append_stderr(chunk, static_cast<size_t>(n));
      }
    } else if (n == 0) {
      close_fd(fd);
    } else if (errno != EINTR) {
      if (errno != EAGAIN) close_fd(fd);
      return;
    }
  }
}

void Subprocess::append_stdout(const char* data, size_t size) {
  const size_t room =
      options_.max_stdout_bytes - std::min(options_.max_stdout_bytes, stdout_buffer_.size());
  if (size > room) stdout_truncated_ = true;
  stdout_buffer_.append(data, std::min(size, room));
}

void Subprocess::append_stderr(const char* data, size_t size) {
  const size_t capacity = options_.stderr_tail_bytes;
  if (capacity == 0) return;
  for (size_t i = 0; i < size; ++i) {
    if (stderr_ring_.size() < capacity) {
      stderr_ring_.push_back(data[i]);
    } else {
      stderr_ring_[stderr_next_] = data[i];
      stderr_next_ = (stderr_next_ + 1) % capacity;
    }
  }
}

std::string Subprocess::stderr_tail() const {
  return stderr_ring_.substr(stderr_next_) + stderr_ring_.substr(0, stderr_next_);
}

std::string Subprocess::take_stdout() {
  std::string out;
  out.swap(stdout_buffer_);
  return out;
}

ReadStatus Subprocess::read_line(std::string* line, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  bool polled = false;
  bool leader_exited = false;
  while (true) {
    const size_t newline = stdout_buffer_.find('\n');
    if (newline != std::string::npos) {
      line->assign(stdout_buffer_, 0, newline);
      stdout_buffer_.erase(0, newline + 1);
      return ReadStatus::line;
    }
    if (stdout_buffer_.size() >= options_.max_stdout_bytes) return ReadStatus::overflow;
    // A dead leader whose stdout a straggler still holds open cannot answer any more.
    if (stdout_fd_ < 0 || leader_exited || status_) {
      stdout_buffer_.clear();
      return ReadStatus::eof;
    }
    const int left_ms = ms_until(deadline);
    if (polled && left_ms == 0) return ReadStatus::timeout;
    leader_exited = pump(left_ms);
    if (leader_exited && stdout_fd_ >= 0) drain(&stdout_fd_, true);
    polled = true;
  }
}

std::optional<ExitStatus> Subprocess::wait(double timeout_s) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = deadline_after(timeout_s);
  while (forked_) {  // not our child: its end comes from the server
    if (fork_end_ready(server_fd_)) {
      reap(false);
      return status_;
    }
    const int left_ms = ms_until(deadline);
    if (left_ms == 0) return std::nullopt;
    pump(left_ms);
  }
  while (true) {
    // WNOWAIT leaves the leader a zombie, so its process-group id cannot be reused before the
    // stragglers of the group are killed in reap().
    siginfo_t info{};
    const int rc = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == pid_) {
      for (int* fd : {&stdout_fd_, &stderr_fd_}) drain(fd, fd == &stdout_fd_);
      reap(true);
      return status_;
    }
    if (rc != 0 && errno != EINTR) {
      reap(true);  // not our child any more (should not happen): record what we can
      return status_;
    }
    const int left_ms = ms_until(deadline);
    if (left_ms == 0) return std::nullopt;
    pump(left_ms);
  }
}

ExitStatus Subprocess::kill() {
  if (!status_) reap(true);
  return status_.value_or(ExitStatus{});
}

void Subprocess::reap(bool kill_first) {
  if (status_ || pid_ <= 0) return;
  if (forked_) {
    // The server reaps it (and kills its group first); it is asked to kill when we must.
    if (kill_first) request_fork_kill(server_fd_);
    constexpr double kServerAnswerS = 10.0;
    bool server_gone = false;
    status_ = read_fork_end(server_fd_, kServerAnswerS, &server_gone);
    // A server that died or hangs cannot kill: the group is killed from here (it may be an
    // orphan now, or already gone).
    if (!status_ || server_gone) {
      ::kill(-pid_, SIGKILL);
      if (!status_) status_ = ExitStatus{false, -1, SIGKILL};
    }
    close_fd(&server_fd_);
  } else {
    if (kill_first) ::kill(-pid_, SIGKILL);
    int raw = 0;
    pid_t got = -1;
    do {
      got = ::waitpid(pid_, &raw, 0);
    } while (got < 0 && errno == EINTR);
    status_ = got == pid_ ? decode_wait_status(raw) : ExitStatus{};
  }
  // The group is dead now: whatever is still in the pipes can be read without blocking.
  for (int* fd : {&stdout_fd_, &stderr_fd_}) drain(fd, fd == &stdout_fd_);
  close_fd(&stdin_fd_);
  close_fd(&stdout_fd_);
  close_fd(&stderr_fd_);
  close_fd(&pidfd_);
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          const std::string& cwd) {
  SpawnOptions options;
  options.argv = argv;
  options.cwd = cwd;
  options.pipe_stdin = false;
  options.merge_stderr = true;
  // Compiler diagnostics past 16 MiB add nothing a reader (or an LLM prompt) can use.
  options.max_stdout_bytes = size_t{16} << 20;
  const auto start = Clock::now();
  Subprocess child(options);
  CommandResult result;
  std::optional<ExitStatus> status = child.wait(timeout_s);
  if (!status) {
    status = child.kill();
    result.timed_out = true;
  }
  result.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  result.output = child.take_stdout();
  if (child.stdout_truncated()) result.output += "\n[kforge: output truncated]\n";
  result.exit_code = status->exited && !result.timed_out ? status->exit_code : -1;
  result.signal = status->exited ? 0 : status->signal;
  return result;
}

}  // namespace kforge::process

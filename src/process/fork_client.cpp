#include "process/fork_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace kforge::process {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const double ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min(std::ceil(ms), 1e9));
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::clamp(seconds, 0.0, 1e7)));
}

/// Sends all of `data` (MSG_NOSIGNAL: a dead server is an error, not a SIGPIPE), the descriptors
/// with the first chunk.
bool send_with_fds(int socket_fd, const std::string& data, const int* fds, size_t count) {
  size_t sent = 0;
  bool fds_sent = false;
  while (sent < data.size()) {
    iovec io{const_cast<char*>(data.data() + sent), data.size() - sent};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)] = {};
    if (!fds_sent) {
      message.msg_control = control;
      message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int) * count);
      std::memcpy(CMSG_DATA(header), fds, sizeof(int) * count);
    }
    const ssize_t n = ::sendmsg(socket_fd, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
    fds_sent = true;
  }
  return true;
}

/// One line from the connection within the deadline, and the sender's pid from the first
/// message's credentials (0 when none came). false on EOF, error or timeout.
bool read_line_with_pid(int socket_fd, Clock::time_point deadline, std::string* line,
                        pid_t* sender, bool* eof) {
  *eof = false;
  while (line->find('\n') == std::string::npos) {
    pollfd pfd{socket_fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, ms_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char buffer[4096];
    iovec io{buffer, sizeof buffer};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket_fd, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *eof = n == 0;
      return false;
    }
    for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS && sender &&
          *sender == 0) {
        ucred credentials{};
        std::memcpy(&credentials, CMSG_DATA(h), sizeof credentials);
        *sender = credentials.pid;
      }
    }
    line->append(buffer, static_cast<size_t>(n));
  }
  line->resize(line->find('\n'));
  return true;
}

std::optional<ExitStatus> parse_end(const std::string& line) {
  const nlohmann::json end = nlohmann::json::parse(line, nullptr, false);
  if (!end.is_object()) return std::nullopt;
  ExitStatus status;
  if (end.contains("exit") && end["exit"].is_number_integer()) {
    status.exited = true;
    status.exit_code = end["exit"].get<int>();
    return status;
  }
  if (end.contains("signal") && end["signal"].is_number_integer()) {
    status.signal = end["signal"].get<int>();
    return status;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ForkedChild> fork_from_server(const ForkRequest& request, int stdin_fd,
                                            int stdout_fd, int stderr_fd, double timeout_s,
                                            std::string* why_not) {
  auto refuse = [&](const std::string& why) -> std::optional<ForkedChild> {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (request.socket_path.empty() || request.socket_path.size() >= sizeof address.sun_path) {
    return refuse("no usable socket path '" + request.socket_path + "'");
  }
  std::memcpy(address.sun_path, request.socket_path.c_str(), request.socket_path.size() + 1);
  const int connection = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connection < 0) return refuse(std::string("socket: ") + std::strerror(errno));
  auto fail = [&](const std::string& why) {
    ::close(connection);
    return refuse(why);
  };
  const int on = 1;
  // The kernel attaches the sender's credentials, its pid translated into our namespace.
  if (::setsockopt(connection, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    return fail(std::string("SO_PASSCRED: ") + std::strerror(errno));
  }
  if (::connect(connection, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return fail("cannot connect to " + request.socket_path + ": " + std::strerror(errno));
  }
  std::string cwd = request.cwd;
  if (cwd.empty()) {
    char here[4096];
    if (::getcwd(here, sizeof here) != nullptr) cwd = here;
  }
  const nlohmann::json body = {{"argv", request.argv},
                               {"environment", request.environment},
                               {"cwd", cwd},
                               {"sandbox", request.sandbox}};
  const int fds[3] = {stdin_fd, stdout_fd, stderr_fd};
  if (!send_with_fds(connection, body.dump() + "\n", fds, 3)) {
    return fail(std::string("cannot send the request: ") + std::strerror(errno));
  }
  std::string line;
  pid_t sender = 0;
  bool eof = false;
  if (!read_line_with_pid(connection, after(timeout_s), &line, &sender, &eof)) {
    request_fork_kill(connection);
    return fail(eof ? "the server closed the connection without an answer"
                    : "no answer within " + std::to_string(timeout_s) + " s");
  }
  const nlohmann::json answer = nlohmann::json::parse(line, nullptr, false);
  if (answer.is_object() && answer.contains("refused")) {
    return fail("refused: " + answer["refused"].dump());
  }
  if (!answer.is_object() || !answer.contains("pid") || sender <= 0) {
    request_fork_kill(connection);
    std::optional<ExitStatus> ended = parse_end(line);
    return fail(ended ? "the child ended before it started (" + ended->describe() + ")"
                      : "unexpected answer: " + line.substr(0, 200));
  }
  return ForkedChild{sender, connection};
}

bool fork_end_ready(int connection) {
  pollfd pfd{connection, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

std::optional<ExitStatus> read_fork_end(int connection, double timeout_s, bool* server_gone) {
  if (server_gone) *server_gone = false;
  std::string line;
  bool eof = false;
  if (read_line_with_pid(connection, after(timeout_s), &line, nullptr, &eof)) {
    if (std::optional<ExitStatus> status = parse_end(line)) return status;
  } else if (!eof) {
    // An error other than EOF reads as a dead server too; a timeout does not.
    pollfd pfd{connection, POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) return std::nullopt;
  }
  if (server_gone) *server_gone = true;
  ExitStatus killed;
  killed.signal = SIGKILL;
  return killed;
}

void request_fork_kill(int connection) {
  static constexpr char kKill[] = "kill\n";
  [[maybe_unused]] const ssize_t n = ::send(connection, kKill, sizeof kKill - 1, MSG_NOSIGNAL);
}

}  // namespace kforge::process

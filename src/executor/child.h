// The child processes of `kforge suite` (the local executor, executor/local_executor.h, and the
// reference checks): one `kforge optimize` per task, its output logged line
// by line, stopped at a deadline or when the suite is (Ctrl-C, SIGTERM). Split from
// suite_command.cpp, which decides what runs; this file only runs it.
#pragma once

#include <signal.h>

#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "process/subprocess.h"

namespace kforge::executor {

/// True once SIGINT or SIGTERM reached the suite since the live StopSignalGuard was made.
bool suite_stopped();

/// What stopped the suite, for its rows: "Ctrl-C" (SIGINT), "SIGTERM", or "a stop request"
/// before any signal.
std::string suite_stop_cause();

/// Routes SIGINT and SIGTERM to suite_stopped() while it lives (and clears the flag when made).
/// The children run in their own process groups, so a terminal's Ctrl-C reaches only the suite,
/// which then kills the child in flight.
class StopSignalGuard {
 public:
  StopSignalGuard();
  ~StopSignalGuard();
  StopSignalGuard(const StopSignalGuard&) = delete;
  StopSignalGuard& operator=(const StopSignalGuard&) = delete;

 private:
  struct sigaction previous_int_ = {};
  struct sigaction previous_term_ = {};
};

/// How one child ended.
struct ChildRun {
  std::optional<process::ExitStatus> status;  // nullopt when killed for time or by Ctrl-C
  bool timed_out = false;
  bool stopped = false;  // Ctrl-C / SIGTERM of the suite
  double wall_s = 0.0;
  std::string last_error;  // the child's last "kforge: error: ..." line, else its last line
};

/// The error a child's output `tail` (its last lines, oldest first) ends with: the text after
/// its last "kforge: error: ", else its last non-empty line. An error that ends with ':' and is
/// followed by indented "  name: why" lines gets the names appended ("...: gelu, gemv (why each
/// did not fit: the log)"), so a one-line table cell still says what was tried.
std::string last_error_line(const std::deque<std::string>& tail);

/// Runs argv with its stdout and stderr going to `log_path` line by line (the first line is the
/// command), for at most `timeout_s` seconds, killing its process group at the deadline or when
/// the suite is stopped; each line is also echoed to stderr after `echo_prefix` when that is not
/// empty. Throws Error when the log cannot be written.
ChildRun run_child(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                   double timeout_s, const std::string& echo_prefix);

}  // namespace kforge::executor

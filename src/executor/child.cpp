#include "executor/child.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/error.h"
#include "common/files.h"

namespace kforge::executor {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Set by Ctrl-C (SIGINT) or SIGTERM while a suite runs: the current task's child is killed and
// the suite stops after writing what it has.
std::atomic<bool> g_suite_stopped{false};
std::atomic<int> g_suite_signal{0};  // which signal stopped it

extern "C" void on_suite_signal(int signal_number) {
  g_suite_signal.store(signal_number);
  g_suite_stopped.store(true);
}

void note_line(const std::string& line, std::ofstream& log, std::deque<std::string>& tail,
               const std::string& echo_prefix) {
  log << line << '\n';
  tail.push_back(line);
  if (tail.size() > 40) tail.pop_front();
  if (!echo_prefix.empty()) std::cerr << echo_prefix << line << '\n';
}

}  // namespace

std::string last_error_line(const std::deque<std::string>& tail) {
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    const size_t at = it->find("kforge: error: ");
    if (at == std::string::npos) continue;
    std::string error = it->substr(at + 15);
    if (error.empty() || error.back() != ':') return error;
    // "...: families tried:" followed by indented "  name: why" lines: the names, in one line.
    std::string names;
    for (auto next = it.base(); next != tail.end() && next->rfind("  ", 0) == 0; ++next) {
      const size_t start = next->find_first_not_of(' ');
      const size_t colon = next->find(':', start);
      if (start == std::string::npos || colon == std::string::npos) break;
      names += (names.empty() ? " " : ", ") + next->substr(start, colon - start);
    }
    return names.empty() ? error : error + names + " (why each did not fit: the log)";
  }
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (!it->empty()) return *it;
  }
  return "";
}

bool suite_stopped() { return g_suite_stopped.load(); }

std::string suite_stop_cause() {
  switch (g_suite_signal.load()) {
    case SIGINT: return "Ctrl-C";
    case SIGTERM: return "SIGTERM";
    default: return "a stop request";
  }
}

StopSignalGuard::StopSignalGuard() {
  g_suite_stopped.store(false);
  g_suite_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = on_suite_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignalGuard::~StopSignalGuard() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

// Runs argv with its stdout and stderr going to `log_path` line by line, for at most
// `timeout_s` seconds, killing its process group at the deadline or when the suite is stopped.
ChildRun run_child(const std::vector<std::string>& argv, const fs::path& log_path, double timeout_s,
                   const std::string& echo_prefix) {
  std::ofstream log(log_path);
  if (!log) throw Error("suite: " + cannot_write(log_path));
  log << "$";
  for (const std::string& arg : argv) log << ' ' << arg;
  log << "\n" << std::flush;
  process::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.pipe_stdin = false;
  spawn.merge_stderr = true;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                  std::min(timeout_s, 1e9)));  // 30 years; 1e20 s would overflow the clock
  auto remaining_s = [&] { return std::chrono::duration<double>(deadline - Clock::now()).count(); };
  process::Subprocess child(spawn);
  ChildRun run;
  std::deque<std::string> tail;
  bool output_open = true;
  // Short slices, so that Ctrl-C and the deadline are noticed within a quarter second.
  constexpr double kSliceS = 0.25;
  while (!run.status) {
    if (suite_stopped()) {
      run.stopped = true;
      break;
    }
    if (remaining_s() <= 0.0) {
      run.timed_out = true;
      break;
    }
    double slice_s = std::min(kSliceS, std::max(remaining_s(), 0.0));
    if (output_open) {
      std::string line;
      process::ReadStatus read = child.read_line(&line, slice_s);
      if (read == process::ReadStatus::line) note_line(line, log, tail, echo_prefix);
      if (read == process::ReadStatus::eof) output_open = false;
      if (read == process::ReadStatus::overflow) {
        note_line("[line too long, dropped]", log, tail, "");
      }
      // A process the child left behind may hold the pipe open after the child exited.
      if (read == process::ReadStatus::timeout) run.status = child.poll_exit();
    } else {
      run.status = child.wait(slice_s);
    }
  }
  if (!run.status) child.kill();
  std::istringstream rest(child.take_stdout());
  for (std::string line; std::getline(rest, line);) note_line(line, log, tail, echo_prefix);
  run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  run.last_error = last_error_line(tail);
  return run;
}

}  // namespace kforge::executor

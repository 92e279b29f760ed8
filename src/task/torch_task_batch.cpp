#include "task/torch_task_batch.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "common/error.h"
#include "process/subprocess.h"
#include "task/torch_task.h"

namespace kforge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

// Importing torch and the derivation before the first problem: seconds (6 s for PyTorch 2.11
// on the H200 machine, 1.4 s of CPU for 1.13 here); two minutes means a broken install.
constexpr double kStartupS = 120.0;
// Per problem on top of its own limit: the fork, the result line and the kill of a hung child.
constexpr double kPerProblemSlackS = 10.0;
// How often the stop request and the deadline are looked at while waiting for a line.
constexpr double kPollS = 1.0;

std::string last_stderr_line(const process::Subprocess& child) {
  std::string text = child.stderr_tail();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t newline = text.rfind('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

// One result line of `derive --batch`: {file, ok, task | error, seconds}.
DerivedProblem parse_result(const std::string& line, const std::string& expected_path) {
  DerivedProblem problem;
  problem.path = expected_path;
  json result;
  try {
    result = json::parse(line);
  } catch (const json::exception& e) {
    problem.error = expected_path + ": the batch derivation printed no valid JSON (" +
                    std::string(e.what()) + ")";
    return problem;
  }
  const std::string file = result.value("file", "");
  if (file != expected_path) {
    throw Error("derive --batch answered for '" + file + "' where '" + expected_path +
                "' came next");
  }
  problem.seconds = result.value("seconds", 0.0);
  if (result.value("ok", false) && result.contains("task") && result.at("task").is_object()) {
    problem.derived = result.at("task");
  } else {
    problem.error = result.value("error", expected_path + ": deriving the task failed");
  }
  return problem;
}

std::vector<std::string> batch_command(const std::string& python,
                                       const std::vector<std::string>& paths, double timeout_s) {
  std::vector<std::string> argv = {python, "-m", "kforge_torch", "derive", "--batch",
                                   // Derived on the host at small sizes; whether the problem's
                                   // own tensors fit is checked against the device a run uses.
                                   "--no-capacity-check", "--time-limit-s",
                                   fmt::format("{}", timeout_s)};
  argv.insert(argv.end(), paths.begin(), paths.end());
  return argv;
}

}  // namespace

std::vector<DerivedProblem> derive_torch_tasks(const std::vector<std::string>& paths,
                                               const BatchDeriveOptions& options) {
  if (!(options.per_problem_timeout_s > 0.0)) {
    throw Error(fmt::format("derive_torch_tasks: per_problem_timeout_s must be > 0, got {}",
                            options.per_problem_timeout_s));
  }
  std::vector<DerivedProblem> results;
  if (paths.empty()) return results;
  std::vector<std::string> absolute;
  for (const std::string& path : paths) {
    absolute.push_back(fs::absolute(path).lexically_normal().string());
  }
  process::SpawnOptions spawn;
  spawn.argv = batch_command(options.python.empty() ? torch_python() : options.python, absolute,
                             options.per_problem_timeout_s);
  spawn.environment = torch_environment();
  spawn.pipe_stdin = false;
  spawn.stderr_tail_bytes = 16384;
  process::Subprocess child(spawn);
  const double budget_s =
      kStartupS + double(paths.size()) * (options.per_problem_timeout_s + kPerProblemSlackS);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::min(budget_s, 1e9)));
  std::string ended;  // why the batch stopped answering, when it did
  while (results.size() < absolute.size()) {
    if (options.should_stop && options.should_stop()) {
      ended = "stopped before this problem was derived";
      break;
    }
    const double left_s = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left_s <= 0.0) {
      ended = fmt::format("the batch derivation did not finish in {:.0f} s", budget_s);
      break;
    }
    std::string line;
    const process::ReadStatus read = child.read_line(&line, std::min(left_s, kPollS));
    if (read == process::ReadStatus::timeout) continue;
    if (read == process::ReadStatus::eof) {
      const std::optional<process::ExitStatus> status = child.wait(kPollS);
      const std::string why = last_stderr_line(child);
      ended = "the batch derivation ended before this problem (" +
              (status ? status->describe() : std::string("stdout closed")) +
              (why.empty() ? "" : ": " + why) + ")";
      break;
    }
    DerivedProblem problem;
    if (read == process::ReadStatus::overflow) {
      problem.path = absolute[results.size()];
      problem.error = problem.path + ": the derived task is too large to read (over 64 MiB)";
    } else {
      problem = parse_result(line, absolute[results.size()]);
    }
    if (options.on_result) options.on_result(results.size(), problem);
    results.push_back(std::move(problem));
  }
  if (!ended.empty()) {
    child.kill();
    while (results.size() < absolute.size()) {
      DerivedProblem problem;
      problem.path = absolute[results.size()];
      problem.error = problem.path + ": " + ended;
      if (options.on_result) options.on_result(results.size(), problem);
      results.push_back(std::move(problem));
    }
  } else if (!child.wait(kPollS)) {
    child.kill();  // every line is in; a batch that lingers has nothing more to say
  }
  return results;
}

}  // namespace kforge

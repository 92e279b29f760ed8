#include "cli/suite_rows.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/files.h"

namespace kforge::cli {
namespace fs = std::filesystem;

// The run directory's run.json names the task it ran; true when it is `task_path`.
bool run_is_of_task(const fs::path& run_dir, const fs::path& task_path) {
  try {
    nlohmann::json run = nlohmann::json::parse(read_file(run_dir / "run.json"));
    return fs::weakly_canonical(run.at("task_path").get<std::string>()) ==
           fs::weakly_canonical(task_path);
  } catch (const std::exception&) {
    return true;  // no readable run.json: a run killed before it said what it ran
  }
}

// Reads run_dir/result.json into `row`; false (with row.failure saying why) when it cannot.
bool read_result(const fs::path& run_dir, report::SuiteRow& row) {
  fs::path path = run_dir / "result.json";
  if (!fs::exists(path)) {
    row.failure = "no result.json in " + run_dir.string();
    return false;
  }
  try {
    report::read_result_into(nlohmann::json::parse(read_file(path)), row);
    return true;
  } catch (const std::exception& e) {
    row.completed = false;
    row.correct = false;
    row.failure = path.string() + ": unreadable: " + e.what();
    return false;
  }
}

// What an unfinished run's run.json says of it (its generator and family) into `row`; nothing
// when there is none (the run failed before writing it).
void read_run_info(const fs::path& run_dir, report::SuiteRow& row) {
  try {
    report::read_run_into(nlohmann::json::parse(read_file(run_dir / "run.json")), row);
  } catch (const std::exception&) {
    // No readable run.json: the row says what the child's output said.
  }
}

// Moves an unfinished run directory out of the way (never deletes it): SUITE_DIR/.incomplete/.
fs::path move_aside(const fs::path& suite_dir, const fs::path& run_dir, const std::string& label) {
  fs::path aside_dir = suite_dir / ".incomplete";
  fs::create_directories(aside_dir);
  fs::path target = aside_dir / label;
  for (int n = 2; fs::exists(target); ++n) target = aside_dir / (label + "-" + std::to_string(n));
  fs::rename(run_dir, target);
  return target;
}

// Tells a script how the suite went: an errored task is an error (1); a task that ran but found
// no correct candidate is a result the caller may still want to see as a failure (3).
int suite_exit_code(const std::vector<report::SuiteRow>& rows) {
  std::vector<std::string> errored, not_correct;
  for (const report::SuiteRow& row : rows) {
    if (row.errored()) errored.push_back(row.name);
    if (!row.errored() && !row.correct) not_correct.push_back(row.name);
  }
  if (!errored.empty()) {
    std::cerr << fmt::format("kforge: error: suite: {} of {} tasks errored: {}\n", errored.size(),
                             rows.size(), fmt::join(errored, ", "));
    return static_cast<int>(ExitCode::error);
  }
  if (!not_correct.empty()) {
    std::cerr << fmt::format("kforge: suite: {} of {} tasks found no correct candidate: {}\n",
                             not_correct.size(), rows.size(), fmt::join(not_correct, ", "));
    return static_cast<int>(ExitCode::not_all_correct);
  }
  return static_cast<int>(ExitCode::ok);
}
std::string describe_row(const report::SuiteRow& row) {
  if (row.correct) {
    std::string compile;
    if (row.compile_speedup) {
      compile = fmt::format(", {:.3f}x over torch.compile{}", *row.compile_speedup,
                            row.compile_status == "cached" ? " (cached ratio)" : "");
    } else if (row.baseline == "compile") {
      compile = ", no torch.compile baseline: " + row.compile_note;
    }
    return fmt::format("correct, {:.3f}x ({:.3f}-{:.3f}x){}, {:.1f} s", row.speedup,
                       row.speedup_ci_low, row.speedup_ci_high, compile, row.wall_s);
  }
  std::string text = row.status() + ": " + row.failure;
  if (row.reference_check == "ran" && row.reference_ms) {
    text += fmt::format("; its reference ran: {:.4f} ms", *row.reference_ms);
  }
  return text;
}

}  // namespace kforge::cli

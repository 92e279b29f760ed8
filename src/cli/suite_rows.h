// What `kforge suite` reads back from its tasks' run directories into rows, and the exit code
// the rows give the suite. Split from suite_command.cpp, which decides what runs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/suite_report.h"

namespace kforge::cli {

/// True when the run directory's run.json names `task_path` as the task it ran, or when there is
/// no readable run.json (a run killed before it said what it ran).
bool run_is_of_task(const std::filesystem::path& run_dir, const std::filesystem::path& task_path);

/// Reads run_dir/result.json into `row`; false (with row.failure saying why: missing or
/// unreadable, naming the file) when it cannot.
bool read_result(const std::filesystem::path& run_dir, report::SuiteRow& row);

/// What an unfinished run's run.json says of it (its generator and family) into `row`; nothing
/// when there is none (the run failed before writing it).
void read_run_info(const std::filesystem::path& run_dir, report::SuiteRow& row);

/// Moves an unfinished run directory out of the way (never deletes it), to
/// SUITE_DIR/.incomplete/<label> (or <label>-2, -3, ... when taken); returns where it went.
std::filesystem::path move_aside(const std::filesystem::path& suite_dir,
                                 const std::filesystem::path& run_dir, const std::string& label);

/// The one-line progress text of a landed row: "correct, 1.234x (1.1-1.3x), 12.0 s", or its
/// status and why it failed.
std::string describe_row(const report::SuiteRow& row);

/// The suite's exit code from its rows: 1 (ExitCode::error) when a task's run errored, else 3
/// (ExitCode::not_all_correct) when a task found no correct candidate, else 0; says which tasks
/// on stderr.
int suite_exit_code(const std::vector<report::SuiteRow>& rows);

}  // namespace kforge::cli

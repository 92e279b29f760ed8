// The reference check of a suite's task that no generator serves: so that every problem of a
// level has at least run its reference where the suite runs (issue 18), the suite runs
//   kforge task TASK --check --report SUITE_DIR/checks/<label>.json [--backend, --baseline,
//   --device as the optimize children get them]
// as a child (its output in SUITE_DIR/logs/<label>.check.log) and puts the reference's time, or
// why it did not run, into the task's row. A continued suite reads a check that ran for the
// same task back instead of running it again.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "report/suite_report.h"

namespace kforge::cli {

/// What the check child needs from the suite.
struct SuiteReferenceCheck {
  std::string kforge;                       // this kforge executable
  std::filesystem::path suite_dir;
  std::vector<std::string> check_args;      // reference_check_args(optimize args)
  double timeout_s = 3600.0;                // the suite's --task-timeout-s
  std::string echo_prefix;                  // --verbose: "  <label>: ", else ""
};

/// Runs (or reads back) the check of `task_file` for `row`, a row that unserved_row() made.
/// When the reference ran: row.reference_ms and row.reference_check = "ran"; row.wall_s adds
/// the child's time. When it did not (it raised, crashed, did not fit the device, timed out,
/// the suite was stopped): the row becomes an error of the task (unserved = false) with exit
/// "reference check failed" (or the timeout / "stopped") and failure = the check's error.
/// `say` gets one progress line. Throws Error only when the log cannot be written.
void check_unserved_reference(const SuiteReferenceCheck& setup,
                              const std::filesystem::path& task_file, report::SuiteRow& row,
                              const std::function<void(const std::string&)>& say);

/// SUITE_DIR/checks/<label>.json: where the check of task `label` writes its report.
std::filesystem::path reference_check_path(const std::filesystem::path& suite_dir,
                                           const std::string& label);

}  // namespace kforge::cli

// The reference check of a suite's task that no generator serves: so that every problem of a
// level has at least run its reference where the suite runs (issue 18), the suite runs
//   kforge task TASK --check --report SUITE_DIR/checks/<label>.json [--backend, --baseline,
//   --device as the optimize children get them]
// on its executor like any task (its output in SUITE_DIR/logs/<label>.check.log): with
// --executor local a child of the suite, with --executor slurm a job of its own on the node
// Slurm picks, with the task's GPUs, throttled, followed, cancelled and timed out as the
// optimize jobs are (executor::TaskKind::reference_check: no memory snapshot, nothing merged).
// When it ends, the reference's time, or why it did not run, goes into the task's row. A
// continued suite reads a check that ran for the same task back instead of running it again.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "executor/executor.h"
#include "report/suite_report.h"

namespace kforge::cli {

/// What the check needs from the suite.
struct SuiteReferenceCheck {
  std::string kforge;  // this kforge executable
  std::filesystem::path suite_dir;
  std::vector<std::string> check_args;  // reference_check_args(optimize args)
  double timeout_s = 3600.0;            // the suite's --task-timeout-s
  std::string echo_prefix;              // --verbose: "  <label>: ", else ""
};

/// The row of a problem no built-in family serves under the templates generator, `why` as
/// unserved_reason() gives it: no optimize runs; its log (row.log_path) holds why each family
/// did not fit. Its reference check, unless skipped, comes next.
report::SuiteRow unserved_row(report::SuiteRow row,
                              const std::pair<std::string, std::string>& why);

/// The check of `task_file` for the task `label`, as the executor runs it.
executor::TaskLaunch reference_check_launch(const SuiteReferenceCheck& setup,
                                            const std::filesystem::path& task_file,
                                            const std::string& label);

/// Settles the check of `task_file` for `row`, a row that unserved_row() made: reads back a
/// check that ran for this very task in an earlier session (row.reference_ms, reference_check
/// "ran", row.wall_s adds what it cost then), else follows again a check job of an earlier
/// session that still runs, else starts the check on `executor`. True when the check is on the
/// executor: the row is finished by finish_reference_check() when its TaskEnd comes back. False
/// when the row is final now (read back, or the executor refused to start it: an error row).
/// `say` gets one progress line.
bool start_reference_check(executor::Executor& executor, const SuiteReferenceCheck& setup,
                           const std::filesystem::path& task_file, report::SuiteRow& row,
                           const std::function<void(const std::string&)>& say);

/// Puts how the check of `row` ended into it (its report, else the executor's end): when the
/// reference ran, row.reference_ms and reference_check = "ran"; when it did not (it raised,
/// crashed, did not fit the device, timed out, Slurm ended the job, the suite was stopped) the
/// row becomes an error of the task (unserved = false) with exit "reference check failed" (or
/// the timeout, "ended by the executor", "stopped") and failure = why. row.wall_s adds the
/// check's time.
void finish_reference_check(const SuiteReferenceCheck& setup, const executor::TaskEnd& end,
                            report::SuiteRow& row);

/// SUITE_DIR/checks/<label>.json: where the check of task `label` writes its report.
std::filesystem::path reference_check_path(const std::filesystem::path& suite_dir,
                                           const std::string& label);

}  // namespace kforge::cli

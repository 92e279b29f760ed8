// The reference checks of a suite's tasks that no generator serves: so that every problem of a
// level has at least run its reference where the suite runs (issue 18), the suite runs
//   kforge task --check-batch SUITE_DIR/checks/<batch>.batch.json [--backend, --baseline,
//   --device as the optimize children get them]
// on its executor like a task (its output in SUITE_DIR/logs/<batch>.log): with --executor
// local a child of the suite, with --executor slurm a job of its own on the node Slurm picks,
// throttled, followed, cancelled and timed out as the optimize jobs are
// (executor::TaskKind::reference_check: no memory snapshot, nothing merged). A batch holds up
// to checks_per_batch() tasks, checked one after another on one set of workers
// (reference_check_batch.h): one kforge process and one torch reference worker's start for all
// of them, where a process per check spent 2.4 s per problem on an H100 around 0.5 s of work.
// Each check writes SUITE_DIR/checks/<label>.json; when the batch ends, each task's row gets its
// reference's time, or why it did not run. A continued suite reads a check that ran for the
// same task back instead of running it again; a batch still running from an earlier session
// (Slurm) is not followed again: its tasks are checked anew.
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

/// How many reference checks one batch holds at most on an executor of `slots` slots (tasks at
/// once): with one slot everything runs one after another anyway, so batches are large (64: one
/// process and workers' start, 1.7-2.2 s on an H100, per 64 checks); with more, 16, so that the
/// slots take several batches of a large level side by side.
std::size_t checks_per_batch(std::size_t slots);

/// A task waiting for its check: its suite label and the task file checked.
struct QueuedCheck {
  std::string label;
  std::filesystem::path task_file;
};

/// Settles `row` (made by unserved_row()) from a check that ran for this very task in an earlier
/// session (row.reference_ms, reference_check "ran", row.wall_s adds what it cost then): true.
/// False when the check must run; `say` gets one progress line either way.
bool read_back_reference_check(const SuiteReferenceCheck& setup,
                               const std::filesystem::path& task_file, report::SuiteRow& row,
                               const std::function<void(const std::string&)>& say);

/// The batch that checks `checks` (1 to checks_per_batch() of them) as the executor runs it,
/// labelled `label`: writes SUITE_DIR/checks/<label>.batch.json and removes the tasks' earlier
/// reports (a report there afterwards is this batch's). Its timeout is the suite's task timeout
/// per check. Throws Error when the batch file cannot be written.
executor::TaskLaunch reference_check_batch_launch(const SuiteReferenceCheck& setup,
                                                  const std::vector<QueuedCheck>& checks,
                                                  const std::string& label);

/// Puts how each check of a batch ended into its row (rows in the batch's order, each made by
/// unserved_row()): when the reference ran (its report says so), row.reference_ms and
/// reference_check = "ran"; when it did not (it raised, crashed, did not fit the device; or the
/// batch timed out, was ended by Slurm or stopped before writing the row's report) the row
/// becomes an error of the task (unserved = false) with exit "reference check failed" (or the
/// timeout, "ended by the executor", "stopped") and failure = why. When the batch was ended from
/// outside (timed out, stopped, ended by the executor), the check it cut (the last that started,
/// by its report or its "in_progress" marker) gets the ending's row even if it wrote a failed
/// report: its workers got the same signal and may have died first; what it reported is quoted
/// after the ending. Each row.wall_s adds its
/// check's own time (its report's wall_s) and an even share of the rest of the batch's time (the
/// process's start and end).
void finish_reference_checks(const SuiteReferenceCheck& setup, const executor::TaskEnd& end,
                             const std::vector<report::SuiteRow*>& rows);

/// SUITE_DIR/checks/<label>.json: where the check of task `label` writes its report.
std::filesystem::path reference_check_path(const std::filesystem::path& suite_dir,
                                           const std::string& label);

}  // namespace kforge::cli

// `kforge task --check-batch FILE`: the reference checks of many tasks in one process, on one set
// of workers. A suite checks the reference of every problem no generator serves (issue 18); run
// one `kforge task --check` per problem, each pays a kforge process, a torch reference worker's
// `import torch` and a device context (2.4 s per problem on an H100, against 0.5 s of checking),
// so that a KernelBench-like level, mostly unserved, spent a fifth of its time outside
// evaluation. A batch starts the workers once and, between tasks, unloads what the last one left
// on them (worker protocol `unload`), so that large problems do not pile up on the device.
//
// A task whose check fails (it raises, crashes its worker, does not fit the device) gets a
// failed report and the batch goes on: a crashed worker is respawned at the next request.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/reference_check.h"

namespace kforge::cli {

/// One check of a batch: the task file to check and where its report goes (to_json(), or
/// failed_check_json() when it fails). `label` names it in the output (the suite's task label).
struct BatchCheck {
  std::string label;
  std::string task_file;
  std::string report_path;
};

/// The checks of a batch file, in order: {"checks": [{"label": "...", "task": "path", "report":
/// "path"}, ...]} (relative paths are relative to the file's folder). Throws Error naming the
/// file and what is wrong with it (unreadable, not JSON, a field missing or not a string, no
/// checks, two checks with one report path).
std::vector<BatchCheck> read_check_batch(const std::string& path);

/// Writes a batch file read_check_batch() reads back (atomically).
void write_check_batch(const std::string& path, const std::vector<BatchCheck>& checks);

/// Runs the checks in order on one ReferenceWorkers of options' backend and device, writing each
/// report as it ends, and before each check a marker in its place ({"ok": false, "in_progress":
/// true, "task_file", "batch"}), so that a batch ended from outside shows which check it cut. A report's "wall_s" is its check's whole time in the batch: loading the
/// task, the workers' start for the first (its "phases" say "workers"), the check, and the
/// unloading after it; "batch" says {"index", "size"}. `say` gets a line per check (its summary
/// or its error). Returns how many checks ran (ok reports). Throws Error only when the backend
/// cannot be resolved (every report is then failed with that error first).
int run_check_batch(const std::vector<BatchCheck>& checks, const ReferenceCheckOptions& options,
                    const std::function<void(const std::string&)>& say);

}  // namespace kforge::cli

// `kforge task FILE [-o OUT.toml] [--json]`: shows the task kforge makes of a file. For a PyTorch
// problem file (KernelBench format) that is the derived task (task/torch_task.h) as TOML, which
// a user can keep, edit and pass to `kforge optimize`; for a TOML task, what kforge read.
// `kforge task FILE --check` runs the task's reference on a backend instead (reference_check.h);
// `kforge task --check-batch LIST` the references of many tasks, on one set of workers
// (reference_check_batch.h: what `kforge suite` runs for the problems no generator serves).
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace kforge::cli {

struct TaskCommandOptions {
  std::string path;         // a task.toml or a problem .py
  std::string output_path;  // -o: write the TOML there (atomically) instead of stdout
  bool json = false;        // print the derived task JSON instead of TOML
  /// --check: run the reference on a backend (cli/reference_check.h) instead of printing the
  /// task; --json then prints the check's JSON.
  bool check = false;
  std::string backend = "auto";
  int device = 0;
  std::string baseline = "eager";
  std::string report_path;  // --report: also write the check's JSON there (ok or not)
  std::string batch_path;   // --check-batch: a batch file (reference_check_batch.h); no FILE
};

void add_task_command(CLI::App& app, TaskCommandOptions& options);

/// Runs `kforge task`; returns the exit code (0, or 1 on an error, which it throws).
int run_task_command(const TaskCommandOptions& options);

}  // namespace kforge::cli

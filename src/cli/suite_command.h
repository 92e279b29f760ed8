// `kforge suite DIR...`: runs `kforge optimize` over every task of a folder and reports the
// field's metrics (correct %, fast_p, geomean speedup with a confidence interval, cost per task).
//
// Each task runs as a child process of the same kforge binary,
//   kforge optimize TASK --run-dir SUITE_DIR/<label> [the suite's optimize options]
// so that a task that crashes or hangs costs only its own row; its output goes to
// SUITE_DIR/logs/<label>.log. Where the child runs is the executor's (cli/suite_executor.h):
// here, one at a time (--executor local), or as one Slurm job per task (--executor slurm,
// executor/slurm_executor.h), rows landing as jobs end. The suite reads each run's result.json
// into a row and writes SUITE_DIR/suite.json and SUITE_DIR/suite.md after every task, so a killed
// suite leaves what it had. Given an existing SUITE_DIR, tasks whose run already wrote
// result.json are not re-run; an unfinished run directory is moved aside to
// SUITE_DIR/.incomplete/ (never deleted) and re-run.
// PyTorch problem files are derived first, all in one Python process (cli/suite_problems.h),
// and each child runs the derived task SUITE_DIR/derived/<label>.toml instead of the .py file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/optimize_command.h"

namespace CLI {
class App;
}

namespace kforge::executor {
class Executor;
}

namespace kforge::cli {

struct SuiteCommandOptions {
  std::vector<std::string> inputs;  // folders (every task.toml below) and task files
  std::string suite_dir;            // default: suites/<first input's name>-<UTC time>
  /// Wall-clock limit of one task's optimize, seconds; past it the child's process group is
  /// killed and the task counts as incorrect. Must be > 0.
  double task_timeout_s = 3600.0;
  /// Limit of one PyTorch problem's derivation, seconds (> 0); past it, that problem is a row
  /// with the error and the other problems are derived on.
  double derive_timeout_s = 300.0;
  /// A PyTorch problem no generator of the suite serves still has its reference run
  /// (cli/suite_reference_check.h) unless this is set (--no-reference-check).
  bool skip_reference_check = false;
  /// Where tasks run (cli/suite_executor.h): "local" (child processes, one at a time) or
  /// "slurm" (one sbatch job per task, the options below).
  std::string executor = "local";
  std::string partition;                // slurm: sbatch --partition ("" = the default)
  int gpus_per_task = 0;                // slurm: sbatch --gpus per job
  int max_parallel = 1;                 // slurm: jobs pending or running at once (>= 1)
  std::vector<std::string> slurm_args;  // slurm: passed to sbatch as they are
  bool retry_failed = false;            // slurm: resubmit once a job Slurm ended
  bool verbose = false;                 // also echo every child's output to stderr
  bool json = false;                    // print suite.json instead of the table
  /// Names of the `kforge optimize` options the suite accepts and passes on ("--steps", ...),
  /// in their declaration order, filled by add_suite_command; CLI11 writes what the user gave
  /// into the maps below (so this object must not move between add_suite_command and parsing).
  std::vector<std::string> passthrough;
  std::map<std::string, std::vector<std::string>> passthrough_values;  // value options
  std::map<std::string, int> passthrough_flags;                        // flags: times given
};

/// How `kforge optimize`'s options are declared (commands.cpp's add_optimize): the suite takes
/// its pass-through options from there, so every optimize option works in a suite and is
/// checked by the same rules.
using AddOptimizeFunction = void (*)(CLI::App& app, OptimizeCommandOptions& options);

/// Adds the `suite` subcommand to `app`: its own options (--suite-dir, --task-timeout-s,
/// --derive-timeout-s, --no-reference-check, --verbose, --json, the executor's) and every
/// non-positional option of `kforge optimize` except --run-dir, --json, --replay and --help, to
/// be passed on to each task.
void add_suite_command(CLI::App& app, SuiteCommandOptions& options,
                       AddOptimizeFunction add_optimize);

/// Runs the suite that `options` (as parsed) describes. Prints progress to stderr and
/// the table (or suite.json with --json) to stdout. Returns 0 when every task is correct, 1
/// (ExitCode::error) when a task's run errored (bad task file, crash, timeout), 3
/// (ExitCode::not_all_correct) when all ran but some found no correct candidate, and 130 after
/// Ctrl-C (suite.json holds the tasks done so far). Throws Error before any task runs for bad
/// input: no task below a folder, a timeout <= 0, an optimize option that `kforge optimize`
/// would refuse, a Slurm option without --executor slurm, no sbatch on PATH.
int run_suite(const SuiteCommandOptions& options, AddOptimizeFunction add_optimize);
/// As above, running the tasks on `task_executor` instead of the executor `options` name
/// (nullptr: that one): the seam the suite's own tests drive with a fake.
int run_suite(const SuiteCommandOptions& options, AddOptimizeFunction add_optimize,
              std::unique_ptr<executor::Executor> task_executor);

}  // namespace kforge::cli

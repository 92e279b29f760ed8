// Where the tasks of a `kforge suite` run: the seam between the suite driver
// (cli/suite_command.cpp: which tasks, their rows, suite.json) and the engine that runs each
// task's `kforge optimize`. Two engines: `local` (a child process of this machine, one at a time:
// local_executor.h) and `slurm` (one sbatch job per task: slurm_executor.h). Another engine
// plugs in by implementing Executor and a name in make_executor's caller.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "process/subprocess.h"

namespace kforge::executor {

/// What a launched command is, for an engine that treats the two apart (slurm: a job's memory).
enum class TaskKind {
  /// `kforge optimize`: writes the memory (slurm: the job gets a snapshot, with --memory and
  /// --devices added to argv, and its evidence is merged when it ends).
  optimize,
  /// `kforge task --check` of a suite's problem that no generator serves (its reference only):
  /// writes no memory and takes no --devices; argv runs as it is.
  reference_check,
};

/// One task to run: the whole command and where it writes.
struct TaskLaunch {
  std::string label;               // the task's name in the suite (unique; its run dir's name)
  std::vector<std::string> argv;   // kforge binary, "optimize", task file, --run-dir, options
  std::filesystem::path run_dir;   // the --run-dir in argv (absolute); empty for a check
  std::filesystem::path log_path;  // the task's output goes here, line by line
  double timeout_s = 3600.0;       // wall-clock limit of the task's run, seconds (> 0)
  std::string echo_prefix;         // non-empty: also echo the output to stderr after it
  TaskKind kind = TaskKind::optimize;
};

/// How one launched task ended.
struct TaskEnd {
  std::string label;
  /// The exit of `kforge optimize`; nullopt when it did not exit by itself (timeout, Ctrl-C,
  /// the cluster ended it).
  std::optional<process::ExitStatus> status;
  bool timed_out = false;  // killed at TaskLaunch::timeout_s (Slurm: state TIMEOUT)
  bool stopped = false;    // the suite was stopped (Ctrl-C, SIGTERM) while it ran
  /// Non-empty when the engine, not the task, ended it, and why: "Slurm job 12 CANCELLED (by
  /// uid 0)", "Slurm job 12 NODE_FAIL on node3". Such a task's row is an error with this text.
  std::string ended_by;
  double wall_s = 0.0;     // from start (local) or submission (slurm) to the end, seconds
  std::string last_error;  // the task's last "kforge: error: ..." line, else its last line
  std::string note;        // engine's remark for the row's log ("retried once after ...")
};

/// Runs launched tasks; the driver calls start() while free_slots() > 0, then wait_any().
/// Implementations own their processes or jobs: destroying one with tasks in flight stops them.
class Executor {
 public:
  virtual ~Executor() = default;
  /// How many more tasks start() accepts before wait_any() must be called (>= 0).
  virtual std::size_t free_slots() = 0;
  /// Starts (local: may run to completion inside; slurm: submits) one task. Throws Error when it
  /// cannot be started at all (sbatch refused it: the message names the task and sbatch's words).
  virtual void start(const TaskLaunch& launch) = 0;
  /// Blocks until at least one started task ended or the suite was stopped (suite_stopped()),
  /// and returns the tasks that ended; empty when none is in flight or on a stop.
  virtual std::vector<TaskEnd> wait_any() = 0;
  /// Stops every task in flight (Ctrl-C of the suite) and returns them, each with stopped set.
  virtual std::vector<TaskEnd> cancel_all() = 0;
  /// Tasks started and not yet returned by wait_any or cancel_all.
  virtual std::size_t in_flight() const = 0;
  /// Called for a task whose run directory an earlier session of the suite left unfinished,
  /// before it is moved aside: true when that session's run still goes on and the executor
  /// follows it from now on as if started here (slurm: its job, of the same kind, is still
  /// pending or running, as after the driver was killed or lost its login session). `launch`
  /// names the task, its kind, run directory and log (argv may be empty). Default: false (local
  /// runs die with the suite).
  virtual bool adopt_running(const TaskLaunch& launch) {
    (void)launch;
    return false;
  }
  /// Called for a task whose run finished in an earlier session of the same suite, before its
  /// row is kept: finishes what the engine left undone for it (slurm: merges the job's memory
  /// if that merge had not happened). Default: nothing.
  virtual void settle_finished(const std::string& label) { (void)label; }
};

}  // namespace kforge::executor

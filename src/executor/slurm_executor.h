// The `slurm` executor: each task of a suite is its own Slurm batch job running
// `kforge optimize` on the node it lands on, with its run directory under the suite directory
// (a filesystem that the login node and the compute nodes share).
//
// Separate jobs, not one job array: the driver submits a task's job only when fewer than
// --max-parallel of its jobs are pending or running, so each job starts from a snapshot of the
// suite's memory taken at its own submission, holding the evidence of every job merged before it
// (job_memory.h); an array submitted at once would give every task the first snapshot. Separate
// jobs also let one task be resubmitted (--retry-failed) or cancelled without touching the
// others. The cost is one sbatch per task, which a cluster takes in milliseconds.
//
// Per task, SUITE_DIR/jobs/<label>/ holds job.sh (the batch script), slurm.out (Slurm's own
// output), memory.sqlite (the job's memory: the snapshot, then its evidence), exit_code
// (written by job.sh when kforge optimize exits) and job.json (job id, attempt, kind, whether
// its memory was merged: a resumed suite never merges a job twice). The task's output goes to
// SUITE_DIR/logs/<label>.log as with the local executor. A reference check (TaskKind::
// reference_check: `kforge task --check` of a problem no generator serves) is a job the same
// way, in the same folder, without memory.sqlite: it writes no memory, so nothing is merged.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "executor/slurm_client.h"

namespace kforge::executor {

/// What `kforge suite --executor slurm` was told.
struct SlurmSettings {
  std::filesystem::path suite_dir;       // absolute; jobs/ goes below it
  std::filesystem::path suite_memory;    // the memory every job's evidence is merged into
  std::filesystem::path seed_knowledge;  // seeds the suite's memory when it does not exist
  std::string partition;                 // "" = the cluster's default partition
  int gpus_per_task = 0;                 // --gpus per job; > 0 also passes --devices 0..N-1
  std::size_t max_parallel = 1;          // jobs pending or running at once (>= 1)
  std::vector<std::string> sbatch_args;  // --slurm-arg values, passed to sbatch as they are
  bool retry_failed = false;  // resubmit once a job Slurm cancelled, timed out or lost a node of
  /// Seconds between two squeue polls while jobs are in flight. 1 s keeps the driver's overhead
  /// per task near a second; one squeue a second is far below what slurmctld serves.
  double poll_interval_s = 1.0;
  /// Waits `seconds` (the poll interval) or less when the suite is stopped meanwhile; tests
  /// replace it. Default: sleeps in quarter seconds, returning early on suite_stopped().
  std::function<void(double seconds)> sleep;
};

/// The job script of one task: checks that the node sees the suite directory (exit 97) and the
/// kforge binary (exit 98), runs `launch.argv` with its output into launch.log_path (first line:
/// the command, as the local executor writes it), then writes its exit code to
/// `job_dir`/exit_code and exits with it.
std::string render_job_script(const TaskLaunch& launch, const std::filesystem::path& suite_dir,
                              const std::filesystem::path& job_dir);

/// `argv` with every --memory option replaced by `--memory job_memory`, and, when
/// `gpus_per_task` > 0 and neither --device nor --devices is given, `--devices 0,...,N-1` (the
/// GPUs Slurm gave the job are renumbered from 0 by CUDA_VISIBLE_DEVICES).
std::vector<std::string> job_argv(std::vector<std::string> argv,
                                  const std::filesystem::path& job_memory, int gpus_per_task);

/// The row text of a job Slurm ended: "Slurm job 12 CANCELLED on node3 (reason)".
std::string describe_slurm_end(const JobStatus& job);

class SlurmExecutor final : public Executor {
 public:
  /// Throws Error for settings that cannot work (max_parallel 0, a relative suite_dir).
  SlurmExecutor(SlurmSettings settings, std::unique_ptr<SlurmClient> client);
  /// Cancels the jobs still in flight (their rows are then missing: the suite resumes them).
  ~SlurmExecutor() override;

  std::size_t free_slots() override;
  /// Snapshots the memory into the task's job folder (an optimize task), writes job.sh, submits
  /// it. A job of an earlier session of the suite that Slurm still runs for this task is
  /// cancelled first.
  void start(const TaskLaunch& launch) override;
  /// Polls squeue every poll_interval_s until a job ended (or the suite is stopped); merges the
  /// memory of each ended job, resubmits one Slurm ended when retry_failed allows, returns the
  /// rest. A squeue that fails is retried at the next poll (said once on stderr).
  /// Throws Error with the job's message when a node could not see the suite directory or the
  /// kforge binary (a shared filesystem is required; every other job would fail alike).
  std::vector<TaskEnd> wait_any() override;
  /// scancel for every job in flight; merges what their memory holds so far.
  std::vector<TaskEnd> cancel_all() override;
  std::size_t in_flight() const override { return jobs_.size(); }
  /// True (and the job followed again) when jobs/<label>/job.json names a job of launch.kind
  /// that Slurm still has pending or running; its slot counts against max_parallel.
  bool adopt_running(const TaskLaunch& launch) override;
  /// Merges the job's memory when the job.json of `label` says it was not merged yet.
  void settle_finished(const std::string& label) override;

 private:
  struct Job {
    TaskLaunch launch;
    int attempt = 1;
    std::chrono::steady_clock::time_point submitted;
    std::string note;  // carried into the TaskEnd (a retry)
    /// When Slurm first said the job ended while its exit_code file was not visible yet.
    std::optional<std::chrono::steady_clock::time_point> ended_without_exit_file;
  };

  std::filesystem::path job_dir(const std::string& label) const;
  void submit(const TaskLaunch& launch, int attempt, const std::string& note);
  void cancel_earlier_job(const std::filesystem::path& dir);
  /// The end of a job Slurm reported ended (`status`) or no longer knows (nullptr); nullopt
  /// when it is not settled yet (its exit_code file not visible yet) or was resubmitted.
  std::optional<TaskEnd> finish(const std::string& job_id, const JobStatus* status);
  std::string merge(const std::string& label);
  void retry(const std::string& job_id, Job job, const std::string& why);

  SlurmSettings settings_;
  std::unique_ptr<SlurmClient> client_;
  std::map<std::string, Job> jobs_;  // by job id: submitted, not yet returned
  bool said_query_failure_ = false;
  std::string node_cannot_run_;  // set when a node could not see the suite dir or kforge
};

}  // namespace kforge::executor

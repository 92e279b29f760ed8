// The narrow seam between the slurm executor (slurm_executor.h) and Slurm's commands: submit a
// batch script, ask for the states of jobs, cancel jobs. CommandSlurmClient runs the real
// sbatch / squeue / sacct / scancel; tests hand the executor a fake. The parsers of the commands'
// output are free functions so that they are tested on recorded text without a cluster.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::executor {

/// A Slurm job state (squeue %T, scontrol JobState, sacct State), the ones a suite tells apart.
enum class JobState {
  pending,
  running,    // also CONFIGURING, COMPLETING, RESIZING, SUSPENDED, REQUEUED...: not ended
  completed,  // the batch script exited 0
  failed,     // the batch script exited non-zero (kforge optimize's exit code, or 97/98)
  cancelled,  // scancel, by the user or an administrator
  timeout,    // past the job's --time
  node_fail,  // its node failed
  preempted,
  out_of_memory,
  boot_fail,
  deadline,
  unknown,  // a state this list does not know (treated as ended: the reason is the text)
};

/// The state a Slurm state word means: "CANCELLED by 0" -> cancelled, "CD" -> completed (both
/// long and compact names); unknown for anything else.
JobState parse_job_state(std::string_view text);
/// False for pending and running (the job may still run); true for every other state.
bool has_ended(JobState state);

/// One job as Slurm reported it.
struct JobStatus {
  std::string job_id;
  JobState state = JobState::unknown;
  std::string state_text;  // Slurm's words: "CANCELLED by 0", "NODE_FAIL"
  std::string reason;      // squeue %r / sacct Reason; "" for "None"
  std::string node;        // where it ran or runs; "" when not known
};

/// Parses `squeue --noheader --states=all --format=%i|%T|%r|%N` output (one job a line, '|'
/// separated; blank lines ignored). Throws Error naming the line when it has fewer than 2 fields.
std::vector<JobStatus> parse_squeue(const std::string& text);
/// Parses `sacct --noheader --parsable2 --allocations --format=JobID,State,Reason,NodeList`.
/// Throws Error naming the line when it has fewer than 2 fields.
std::vector<JobStatus> parse_sacct(const std::string& text);
/// The job id in `sbatch --parsable` output ("12" or "12;cluster", maybe after warning lines).
/// Throws Error quoting the output when no line is a job id.
std::string parse_sbatch_job_id(const std::string& output);

/// What the executor asks of Slurm.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  /// Submits `script` with `sbatch_args` (before the script); returns the job id. Throws Error
  /// with sbatch's own words when sbatch refuses it.
  virtual std::string submit(const std::vector<std::string>& sbatch_args,
                             const std::filesystem::path& script) = 0;
  /// The states of the named jobs that Slurm still knows; a job it no longer knows (past
  /// MinJobAge without an accounting database) is absent from the result. Throws Error when
  /// Slurm cannot be asked (controller down): the caller retries at its next poll.
  virtual std::vector<JobStatus> query(const std::vector<std::string>& job_ids) = 0;
  /// Cancels the named jobs (scancel); ignores jobs that already ended.
  virtual void cancel(const std::vector<std::string>& job_ids) = 0;
};

/// The real client: sbatch, squeue, sacct and scancel from $PATH, each with a 60 s limit.
class CommandSlurmClient final : public SlurmClient {
 public:
  /// Throws Error saying what is missing when sbatch, squeue or scancel is not on $PATH
  /// ("--executor slurm: sbatch not found on PATH; ...").
  CommandSlurmClient();
  std::string submit(const std::vector<std::string>& sbatch_args,
                     const std::filesystem::path& script) override;
  /// squeue first (live and recently ended jobs), then sacct for the rest when the cluster has
  /// an accounting database (without one, sacct says so and those jobs are left out).
  std::vector<JobStatus> query(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;

 private:
  bool sacct_works_ = true;  // false once sacct said accounting is disabled
};

}  // namespace kforge::executor

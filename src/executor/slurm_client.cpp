#include "executor/slurm_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/text.h"
#include "common/files.h"
#include "process/subprocess.h"

namespace kforge::executor {
namespace {

// Each Slurm command answers in well under a second on a healthy controller; 60 s covers a busy
// one and still surfaces a hung controller as an error.
constexpr double kCommandTimeoutS = 60.0;

std::string trim(std::string text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), space));
  text.erase(std::find_if_not(text.rbegin(), text.rend(), space).base(), text.end());
  return text;
}

// "None" and "(null)" are how Slurm says there is nothing.
std::string nothing_to_empty(std::string text) {
  text = trim(std::move(text));
  return (text == "None" || text == "(null)" || text == "(None)") ? "" : text;
}

// Parses '|'-separated lines whose first fields are job id, state, reason, node.
std::vector<JobStatus> parse_lines(const std::string& text, const char* command) {
  std::vector<JobStatus> jobs;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) continue;
    std::vector<std::string> fields = split(line, '|');
    if (fields.size() < 2) {
      throw Error(fmt::format("{}: unexpected line '{}' (expected JOBID|STATE|REASON|NODES)",
                              command, line));
    }
    JobStatus job;
    job.job_id = trim(fields[0]);
    job.state_text = trim(fields[1]);
    job.state = parse_job_state(job.state_text);
    if (fields.size() > 2) job.reason = nothing_to_empty(fields[2]);
    if (fields.size() > 3) job.node = nothing_to_empty(fields[3]);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

process::CommandResult run_slurm(const std::vector<std::string>& argv) {
  return process::run_command(argv, kCommandTimeoutS);
}

std::string first_line(const std::string& text) {
  std::string line = trim(text.substr(0, text.find('\n')));
  return line.empty() ? "(no output)" : line;
}

}  // namespace

JobState parse_job_state(std::string_view text) {
  std::string word(text.substr(0, text.find(' ')));          // "CANCELLED by 0" -> "CANCELLED"
  if (!word.empty() && word.back() == '+') word.pop_back();  // sacct: "CANCELLED+"
  static const std::pair<const char*, JobState> kNames[] = {
      {"PENDING", JobState::pending},
      {"PD", JobState::pending},
      {"RUNNING", JobState::running},
      {"R", JobState::running},
      {"CONFIGURING", JobState::running},
      {"CF", JobState::running},
      {"COMPLETING", JobState::running},
      {"CG", JobState::running},
      {"SUSPENDED", JobState::running},
      {"S", JobState::running},
      {"REQUEUED", JobState::pending},
      {"RQ", JobState::pending},
      {"REQUEUE_HOLD", JobState::pending},
      {"REQUEUE_FED", JobState::pending},
      {"RESIZING", JobState::running},
      {"STOPPED", JobState::running},
      {"SIGNALING", JobState::running},
      {"STAGE_OUT", JobState::running},
      {"COMPLETED", JobState::completed},
      {"CD", JobState::completed},
      {"FAILED", JobState::failed},
      {"F", JobState::failed},
      {"CANCELLED", JobState::cancelled},
      {"CA", JobState::cancelled},
      {"TIMEOUT", JobState::timeout},
      {"TO", JobState::timeout},
      {"NODE_FAIL", JobState::node_fail},
      {"NF", JobState::node_fail},
      {"PREEMPTED", JobState::preempted},
      {"PR", JobState::preempted},
      {"OUT_OF_MEMORY", JobState::out_of_memory},
      {"OOM", JobState::out_of_memory},
      {"BOOT_FAIL", JobState::boot_fail},
      {"BF", JobState::boot_fail},
      {"DEADLINE", JobState::deadline},
      {"DL", JobState::deadline},
  };
  for (const auto& [name, state] : kNames) {
    if (word == name) return state;
  }
  return JobState::unknown;
}

bool has_ended(JobState state) { return state != JobState::pending && state != JobState::running; }

std::vector<JobStatus> parse_squeue(const std::string& text) { return parse_lines(text, "squeue"); }

std::vector<JobStatus> parse_sacct(const std::string& text) {
  std::vector<JobStatus> jobs;
  for (JobStatus& job : parse_lines(text, "sacct")) {
    // --allocations leaves out steps; a stray "12.batch" line would repeat its job.
    if (job.job_id.find('.') == std::string::npos) jobs.push_back(std::move(job));
  }
  return jobs;
}

std::string parse_sbatch_job_id(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::string id = trim(line.substr(0, line.find(';')));
    if (!id.empty() &&
        std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return id;
    }
  }
  throw Error("sbatch --parsable: no job id in its output '" + first_line(output) + "'");
}

CommandSlurmClient::CommandSlurmClient() {
  for (const char* tool : {"sbatch", "squeue", "scancel"}) {
    if (find_on_path(tool).empty()) {
      throw Error(fmt::format(
          "--executor slurm: {} not found on PATH; run the suite on a Slurm login node (where "
          "sbatch, squeue and scancel are installed), or use --executor local",
          tool));
    }
  }
}

std::string CommandSlurmClient::submit(const std::vector<std::string>& sbatch_args,
                                       const std::filesystem::path& script) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), sbatch_args.begin(), sbatch_args.end());
  argv.push_back(script.string());
  process::CommandResult result = run_slurm(argv);
  if (!result.succeeded()) {
    throw Error(fmt::format("sbatch refused {}: {}", script.string(),
                            result.timed_out ? "no answer within 60 s" : trim(result.output)));
  }
  return parse_sbatch_job_id(result.output);
}

std::vector<JobStatus> CommandSlurmClient::query(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return {};
  const std::string ids = fmt::format("{}", fmt::join(job_ids, ","));
  process::CommandResult squeue =
      run_slurm({"squeue", "--noheader", "--states=all", "--format=%i|%T|%r|%N", "--jobs=" + ids});
  std::vector<JobStatus> jobs;
  if (squeue.succeeded()) {
    jobs = parse_squeue(squeue.output);
  } else if (squeue.output.find("Invalid job id") == std::string::npos) {
    // "Invalid job id" only means that none of the jobs is known any more.
    throw Error("squeue: " +
                (squeue.timed_out ? "no answer within 60 s" : first_line(squeue.output)));
  }
  std::set<std::string> known;
  for (const JobStatus& job : jobs) known.insert(job.job_id);
  std::vector<std::string> missing;
  for (const std::string& id : job_ids) {
    if (!known.count(id)) missing.push_back(id);
  }
  if (missing.empty() || !sacct_works_ || find_on_path("sacct").empty()) return jobs;
  process::CommandResult sacct =
      run_slurm({"sacct", "--noheader", "--parsable2", "--allocations",
                 "--format=JobID,State,Reason,NodeList",
                 "--jobs=" + fmt::format("{}", fmt::join(missing, ","))});
  if (!sacct.succeeded()) {
    // "Slurm accounting storage is disabled": no database keeps ended jobs, so sacct is not
    // asked again; any other failure is retried at the next poll. Neither is an error: the
    // jobs left out are the ones Slurm no longer knows.
    if (sacct.output.find("disabled") != std::string::npos) sacct_works_ = false;
    return jobs;
  }
  for (JobStatus& job : parse_sacct(sacct.output)) jobs.push_back(std::move(job));
  return jobs;
}

void CommandSlurmClient::cancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), job_ids.begin(), job_ids.end());
  process::CommandResult result = run_slurm(argv);
  // scancel of a job that already ended exits non-zero ("Job has already finished"): fine.
  if (result.timed_out) throw Error("scancel: no answer within 60 s");
}

}  // namespace kforge::executor

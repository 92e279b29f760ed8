#include "executor/slurm_executor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <deque>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "executor/child.h"
#include "executor/job_memory.h"

namespace kforge::executor {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Exit codes of job.sh when the node cannot run the task at all (kforge optimize uses 0-3 and
// 130; 97 and 98 are far from both and from 128 + signal).
constexpr int kNoSuiteDirExit = 97;
constexpr int kNoKforgeExit = 98;
// A shared filesystem may show the node's exit_code file to the login node seconds after Slurm
// reports the job ended (NFS attribute caching: 3-60 s by default, acregmin/acregmax).
constexpr double kExitFileGraceS = 30.0;

void say(const std::string& line) { std::cerr << "kforge: suite: " << line << "\n"; }

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string quote_all(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + quote(arg);
  return line;
}

nlohmann::json read_json_or_empty(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const std::exception&) {
    return nlohmann::json::object();
  }
}

std::optional<int> read_exit_code(const fs::path& path) {
  try {
    return std::stoi(read_file(path));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The last lines of a file, oldest first (at most 40: what last_error_line needs).
std::deque<std::string> tail_of(const fs::path& path) {
  std::deque<std::string> tail;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > 40) tail.pop_front();
  }
  return tail;
}

// Slurm's --time takes whole minutes; a task's limit is rounded up so that Slurm never ends a
// task before --task-timeout-s.
std::string time_limit_minutes(double timeout_s) {
  return std::to_string(static_cast<long long>(std::max(1.0, std::ceil(timeout_s / 60.0))));
}

const char* kind_name(TaskKind kind) {
  return kind == TaskKind::reference_check ? "reference_check" : "optimize";
}

bool retryable(JobState state) {
  return state == JobState::cancelled || state == JobState::timeout ||
         state == JobState::node_fail || state == JobState::preempted ||
         state == JobState::boot_fail;
}

fs::path free_name(const fs::path& folder, const std::string& name) {
  fs::path target = folder / name;
  for (int n = 2; fs::exists(target); ++n) target = folder / (name + "-" + std::to_string(n));
  return target;
}

void default_sleep(double seconds) {
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
  while (Clock::now() < end && !suite_stopped()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace

std::string render_job_script(const TaskLaunch& launch, const fs::path& suite_dir,
                              const fs::path& job_dir) {
  const std::string suite = quote(suite_dir.string());
  const std::string kforge = quote(launch.argv.front());
  std::string script = "#!/bin/sh\n";
  script += "# kforge suite: task " + launch.label + " (written by the suite driver)\n";
  script += fmt::format(
      "if [ ! -d {0} ]; then\n"
      "  echo \"kforge: error: the suite directory {1} is not visible on node $(hostname); "
      "--executor slurm needs it on a filesystem the compute nodes share\" >&2\n"
      "  exit {2}\nfi\n",
      suite, suite_dir.string(), kNoSuiteDirExit);
  script += fmt::format(
      "if [ ! -x {0} ]; then\n"
      "  echo \"kforge: error: the kforge binary {1} is not visible on node $(hostname); "
      "install kforge on a filesystem the compute nodes share\" >&2\n"
      "  exit {2}\nfi\n",
      kforge, launch.argv.front(), kNoKforgeExit);
  script += "printf '%s\\n' " + quote("$ " + fmt::format("{}", fmt::join(launch.argv, " "))) +
            " > " + quote(launch.log_path.string()) + "\n";
  script += quote_all(launch.argv) + " >> " + quote(launch.log_path.string()) + " 2>&1\n";
  script += "code=$?\n";
  const std::string exit_file = (job_dir / "exit_code").string();
  script += "echo \"$code\" > " + quote(exit_file + ".tmp") + " && mv " +
            quote(exit_file + ".tmp") + " " + quote(exit_file) + "\n";
  script += "exit \"$code\"\n";
  return script;
}

std::vector<std::string> job_argv(std::vector<std::string> argv, const fs::path& job_memory,
                                  int gpus_per_task) {
  bool names_device = false;
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--memory" && i + 1 < argv.size()) {
      ++i;  // the suite's memory: the job gets its snapshot instead
      continue;
    }
    if (argv[i].rfind("--memory=", 0) == 0) continue;
    if (argv[i] == "--device" || argv[i] == "--devices" || argv[i].rfind("--device=", 0) == 0 ||
        argv[i].rfind("--devices=", 0) == 0) {
      names_device = true;
    }
    out.push_back(argv[i]);
  }
  out.push_back("--memory");
  out.push_back(job_memory.string());
  if (gpus_per_task > 0 && !names_device) {
    std::vector<int> devices;
    for (int d = 0; d < gpus_per_task; ++d) devices.push_back(d);
    out.push_back("--devices");
    out.push_back(fmt::format("{}", fmt::join(devices, ",")));
  }
  return out;
}

std::string describe_slurm_end(const JobStatus& job) {
  std::string text = "Slurm job " + job.job_id + " " + job.state_text;
  if (!job.node.empty()) text += " on " + job.node;
  if (!job.reason.empty()) text += " (" + job.reason + ")";
  return text;
}

SlurmExecutor::SlurmExecutor(SlurmSettings settings, std::unique_ptr<SlurmClient> client)
    : settings_(std::move(settings)), client_(std::move(client)) {
  if (settings_.max_parallel == 0)
    throw Error("--max-parallel: expected a whole number >= 1, got 0");
  if (!settings_.suite_dir.is_absolute()) {
    throw Error("slurm executor: the suite directory must be an absolute path, got " +
                settings_.suite_dir.string());
  }
  if (!settings_.sleep) settings_.sleep = default_sleep;
}

SlurmExecutor::~SlurmExecutor() {
  if (jobs_.empty()) return;
  try {
    cancel_all();
  } catch (const std::exception& e) {
    say(std::string("could not cancel the suite's jobs: ") + e.what());
  }
}

fs::path SlurmExecutor::job_dir(const std::string& label) const {
  return settings_.suite_dir / "jobs" / label;
}

std::size_t SlurmExecutor::free_slots() {
  return jobs_.size() >= settings_.max_parallel ? 0 : settings_.max_parallel - jobs_.size();
}

void SlurmExecutor::start(const TaskLaunch& launch) {
  const fs::path dir = job_dir(launch.label);
  if (fs::exists(dir)) {
    // An earlier session's attempt: its job may still run (a driver killed hard), its memory
    // may not be merged. Both are settled, then the folder is kept aside, never deleted.
    cancel_earlier_job(dir);
    settle_finished(launch.label);
    fs::create_directories(dir.parent_path() / ".attempts");
    fs::rename(dir, free_name(dir.parent_path() / ".attempts", launch.label));
  }
  submit(launch, 1, "");
}

void SlurmExecutor::cancel_earlier_job(const fs::path& dir) {
  const std::string job_id = read_json_or_empty(dir / "job.json").value("job_id", "");
  if (job_id.empty()) return;
  for (const JobStatus& job : client_->query({job_id})) {
    if (job.job_id == job_id && !has_ended(job.state)) {
      say("Slurm job " + job_id + " of an earlier session still " + job.state_text +
          " for this task; cancelled (the task is submitted again)");
      client_->cancel({job_id});
    }
  }
}

bool SlurmExecutor::adopt_running(const TaskLaunch& launch) {
  const nlohmann::json record = read_json_or_empty(job_dir(launch.label) / "job.json");
  const std::string job_id = record.value("job_id", "");
  if (job_id.empty() || record.value("merged", false)) return false;
  // A job of the other kind (the task was served then and is not now, or the reverse) is not
  // this launch's: start() cancels it.
  if (record.value("kind", "optimize") != kind_name(launch.kind)) return false;
  for (const JobStatus& job : client_->query({job_id})) {
    if (job.job_id != job_id || has_ended(job.state)) continue;
    jobs_[job_id] = Job{launch, record.value("attempt", 1), Clock::now(),
                        "Slurm job " + job_id + " followed again after the suite was resumed",
                        std::nullopt};
    return true;
  }
  return false;
}

void SlurmExecutor::submit(const TaskLaunch& launch, int attempt, const std::string& note) {
  const fs::path dir = job_dir(launch.label);
  fs::create_directories(dir);
  TaskLaunch job_launch = launch;
  if (launch.kind == TaskKind::optimize) {
    snapshot_memory(settings_.suite_memory, settings_.seed_knowledge, dir / "memory.sqlite");
    job_launch.argv = job_argv(launch.argv, dir / "memory.sqlite", settings_.gpus_per_task);
  }  // a reference check writes no memory: no snapshot, nothing to merge (merge() finds none)
  write_file_atomically(dir / "job.sh", render_job_script(job_launch, settings_.suite_dir, dir));
  std::vector<std::string> args = {
      "--job-name=kforge-" + launch.label, "--output=" + (dir / "slurm.out").string(),
      "--chdir=" + settings_.suite_dir.string(), "--time=" + time_limit_minutes(launch.timeout_s)};
  if (!settings_.partition.empty()) args.push_back("--partition=" + settings_.partition);
  if (settings_.gpus_per_task > 0)
    args.push_back(fmt::format("--gpus={}", settings_.gpus_per_task));
  args.insert(args.end(), settings_.sbatch_args.begin(), settings_.sbatch_args.end());
  const std::string job_id =
      with_context("task " + launch.label, [&] { return client_->submit(args, dir / "job.sh"); });
  nlohmann::json record = {{"label", launch.label},
                           {"job_id", job_id},
                           {"attempt", attempt},
                           {"kind", kind_name(launch.kind)},
                           {"merged", false},
                           {"sbatch_args", args}};
  write_file_atomically(dir / "job.json", record.dump(2) + "\n");
  jobs_[job_id] = Job{launch, attempt, Clock::now(), note, std::nullopt};
}

std::vector<TaskEnd> SlurmExecutor::wait_any() {
  while (!jobs_.empty() && !suite_stopped()) {
    std::vector<std::string> ids;
    for (const auto& [id, job] : jobs_) ids.push_back(id);
    std::map<std::string, JobStatus> states;
    try {
      for (JobStatus& job : client_->query(ids)) states[job.job_id] = std::move(job);
    } catch (const std::exception& e) {
      // A controller that does not answer is retried: the jobs run on without the driver.
      if (!said_query_failure_) say(std::string("cannot ask Slurm (retrying): ") + e.what());
      said_query_failure_ = true;
      settings_.sleep(settings_.poll_interval_s);
      continue;
    }
    said_query_failure_ = false;
    std::vector<TaskEnd> ended;
    for (const std::string& id : ids) {
      auto state = states.find(id);
      const JobStatus* status = state == states.end() ? nullptr : &state->second;
      if (status != nullptr && !has_ended(status->state)) continue;
      if (std::optional<TaskEnd> end = finish(id, status)) ended.push_back(std::move(*end));
    }
    if (!node_cannot_run_.empty()) {
      // Every other job would fail alike: stop here (the destructor cancels the rest).
      throw Error(node_cannot_run_ + " (the suite stops; run it again once the nodes see both)");
    }
    if (!ended.empty()) return ended;
    settings_.sleep(settings_.poll_interval_s);
  }
  return {};
}

std::optional<TaskEnd> SlurmExecutor::finish(const std::string& job_id, const JobStatus* status) {
  Job& job = jobs_.at(job_id);
  const fs::path dir = job_dir(job.launch.label);
  const std::optional<int> exit_code = read_exit_code(dir / "exit_code");
  const bool script_ended = status == nullptr || status->state == JobState::completed ||
                            status->state == JobState::failed;
  if (script_ended && !exit_code) {
    if (!job.ended_without_exit_file) job.ended_without_exit_file = Clock::now();
    if (std::chrono::duration<double>(Clock::now() - *job.ended_without_exit_file).count() <
        kExitFileGraceS) {
      return std::nullopt;  // the node's file may not be visible here yet
    }
  }
  TaskEnd end;
  end.label = job.launch.label;
  end.wall_s = std::chrono::duration<double>(Clock::now() - job.submitted).count();
  end.note = job.note;
  if (script_ended && exit_code) {
    if (*exit_code == kNoSuiteDirExit || *exit_code == kNoKforgeExit) {
      end.ended_by = last_error_line(tail_of(dir / "slurm.out"));
      if (end.ended_by.empty()) {
        end.ended_by =
            "Slurm job " + job_id + ": the node cannot see the suite directory or kforge";
      }
      node_cannot_run_ = end.ended_by;
    } else {
      end.status = process::ExitStatus{true, *exit_code, 0};
    }
  } else if (status == nullptr) {
    end.ended_by = "Slurm job " + job_id +
                   " ended without writing its exit code, and Slurm no longer knows how it "
                   "ended (no accounting database); see " +
                   (dir / "slurm.out").string();
  } else if (script_ended) {
    end.ended_by = describe_slurm_end(*status) + " before kforge " +
                   (job.launch.kind == TaskKind::optimize ? "optimize" : "task --check") +
                   " ended (see " + (dir / "slurm.out").string() +
                   "; a node that cannot write the suite "
                   "directory fails so)";
  } else {
    end.ended_by = describe_slurm_end(*status);
    end.timed_out = status->state == JobState::timeout;
    if (settings_.retry_failed && job.attempt == 1 && retryable(status->state)) {
      retry(job_id, std::move(job), end.ended_by);
      return std::nullopt;
    }
  }
  const std::string merged = merge(job.launch.label);
  if (!merged.empty()) end.note += (end.note.empty() ? "" : "; ") + merged;
  end.last_error = last_error_line(tail_of(job.launch.log_path));
  jobs_.erase(job_id);
  return end;
}

void SlurmExecutor::retry(const std::string& job_id, Job job, const std::string& why) {
  jobs_.erase(job_id);
  const TaskLaunch launch = job.launch;
  merge(launch.label);  // what the first attempt learned stays learned
  // kforge optimize wants an empty run directory: the first attempt's is kept aside.
  if (!launch.run_dir.empty() && fs::exists(launch.run_dir)) {
    const fs::path aside = settings_.suite_dir / ".incomplete";
    fs::create_directories(aside);
    fs::rename(launch.run_dir, free_name(aside, launch.label + "-job" + job_id));
  }
  const fs::path dir = job_dir(launch.label);
  fs::create_directories(dir.parent_path() / ".attempts");
  fs::rename(dir, free_name(dir.parent_path() / ".attempts", launch.label + "-job" + job_id));
  say(launch.label + ": " + why + "; submitted once more (--retry-failed)");
  submit(launch, job.attempt + 1, "retried once after " + why);
}

std::string SlurmExecutor::merge(const std::string& label) {
  const fs::path dir = job_dir(label);
  nlohmann::json record = read_json_or_empty(dir / "job.json");
  if (record.value("merged", false) || !fs::exists(dir / "memory.sqlite")) return "";
  try {
    const MemoryMerge merged =
        merge_memory(dir / "memory.sqlite", settings_.suite_memory, settings_.seed_knowledge);
    record["merged"] = true;
    record["evidence_merged"] = merged.evidence_added;
    write_file_atomically(dir / "job.json", record.dump(2) + "\n");
    return fmt::format("memory: {} new evidence rows merged into {}", merged.evidence_added,
                       settings_.suite_memory.string());
  } catch (const std::exception& e) {
    // The row still counts; the merge is tried again when the suite is resumed.
    say(label + ": its memory was not merged (the next run of the suite tries again): " + e.what());
    return std::string("memory not merged: ") + e.what();
  }
}

std::vector<TaskEnd> SlurmExecutor::cancel_all() {
  std::vector<std::string> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  if (!ids.empty()) client_->cancel(ids);
  std::vector<TaskEnd> ended;
  for (const std::string& id : ids) {
    Job& job = jobs_.at(id);
    TaskEnd end;
    end.label = job.launch.label;
    end.stopped = true;
    end.ended_by = "Slurm job " + id + " cancelled: the suite was stopped";
    end.wall_s = std::chrono::duration<double>(Clock::now() - job.submitted).count();
    end.note = merge(job.launch.label);  // what it recorded so far
    ended.push_back(std::move(end));
  }
  jobs_.clear();
  return ended;
}

void SlurmExecutor::settle_finished(const std::string& label) {
  if (const std::string merged = merge(label); !merged.empty()) say(label + ": " + merged);
}

}  // namespace kforge::executor

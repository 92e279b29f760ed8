// SuiteRunner (suite_runner.h): the suite's tasks on an executor, row by row. Split from
// suite_command.cpp, which parses the command and sets the suite up.
#include "cli/suite_runner.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "cli/suite_reference_check.h"
#include "cli/suite_rows.h"
#include "common/error.h"
#include "common/files.h"
#include "executor/child.h"
#include "report/suite_html.h"
#include "report/suite_report.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;
using executor::suite_stopped;

class SuiteRunner::Impl {
 public:
  Impl(const SuiteCommandOptions& options, std::vector<std::string> optimize_args,
              fs::path suite_dir, executor::Executor& executor)
      : options_(options),
        optimize_args_(std::move(optimize_args)),
        suite_dir_(std::move(suite_dir)),
        executor_(executor) {}

  // Derives the PyTorch problems whose run has not finished (one Python process for all);
  // false when stopped by a signal meanwhile.
  bool derive_problems(const std::vector<SuiteTask>& tasks) {
    SuiteProblemOptions derive;
    derive.per_problem_timeout_s = options_.derive_timeout_s;
    derive.say = say;
    derive.should_stop = [] { return suite_stopped(); };
    problems_ = prepare_suite_problems(tasks, suite_dir_, [this](const SuiteTask& task) {
      report::SuiteRow finished;
      const fs::path run_dir = suite_dir_ / task.label;
      return !(fs::exists(run_dir) && read_result(run_dir, finished));
    }, derive);
    return !suite_stopped();
  }

  // Starts every task in order on the executor, as its free slots allow, and lands each row as
  // its task ends; false when stopped by a signal before the end (the tasks in flight are then
  // cancelled and their rows say so).
  bool run(const std::vector<SuiteTask>& tasks) {
    fs::create_directories(suite_dir_ / "logs");
    slots_.assign(tasks.size(), std::nullopt);
    for (size_t i = 0; i < tasks.size() && !suite_stopped(); ++i) {
      std::string progress = fmt::format("[{}/{}] {}", i + 1, tasks.size(), tasks[i].label);
      std::optional<report::SuiteRow> done = start_task(i, tasks[i], progress);
      if (done) land(i, std::move(*done), progress);
      while (executor_.free_slots() == 0 && !suite_stopped()) collect(executor_.wait_any());
    }
    if (!queued_checks_.empty() && !suite_stopped()) start_checks();  // the last, partial batch
    while (executor_.in_flight() > 0 && !suite_stopped()) collect(executor_.wait_any());
    if (suite_stopped()) collect(executor_.cancel_all());
    return !suite_stopped();
  }

  const std::vector<report::SuiteRow>& rows() const { return rows_; }
  report::SuiteMetrics metrics() const {
    std::vector<report::SuiteTaskOutcome> outcomes;
    for (const report::SuiteRow& row : rows_) outcomes.push_back(row.outcome());
    return report::compute_suite_metrics(outcomes);
  }
  nlohmann::json json() const {
    return report::suite_json(rows_, metrics(), suite_dir_.string(), optimize_args_);
  }

 private:
  static void say(const std::string& line) { std::cerr << "kforge: suite: " << line << "\n"; }


  // A task's row kept in task order, said and written at once.
  void land(size_t index, report::SuiteRow row, const std::string& progress) {
    say(progress + ": " + describe_row(row));
    slots_[index] = std::move(row);
    rows_.clear();
    for (const std::optional<report::SuiteRow>& slot : slots_) {
      if (slot) rows_.push_back(*slot);
    }
    write_outputs();
  }

  // Turns the ends the executor returned into rows.
  void collect(const std::vector<executor::TaskEnd>& ends) {
    for (const executor::TaskEnd& end : ends) {
      auto started = started_.find(end.label);
      if (started == started_.end()) continue;  // not started by this runner: cannot happen
      Started task = std::move(started->second);
      started_.erase(started);
      if (!task.batch.empty()) {  // a batch of reference checks
        if (!end.note.empty()) say(end.label + ": " + end.note);
        std::vector<report::SuiteRow*> rows;
        for (Started& check : task.batch) rows.push_back(&check.row);
        finish_reference_checks(check_setup("checks"), end, rows);
        for (Started& check : task.batch) land(check.index, std::move(check.row), check.progress);
      } else {
        land(task.index, end_row(std::move(task.row), end), task.progress);
      }
    }
  }

  // Starts the queued reference checks as one batch on the executor (a free slot is there); a
  // batch the executor refuses makes each of its tasks an error row.
  void start_checks() {
    std::vector<Started> batch = std::move(queued_checks_);
    queued_checks_.clear();
    std::vector<QueuedCheck> checks;
    for (const Started& check : batch) checks.push_back({check.row.name, check.task_file});
    const std::string label = "checks-" + batch.front().row.name;
    try {
      const executor::TaskLaunch launch =
          reference_check_batch_launch(check_setup("checks"), checks, label);
      say(fmt::format("checking {} unserved problem(s)' references in one batch (kforge task "
                      "--check-batch; log {})", checks.size(), launch.log_path.string()));
      executor_.start(launch);
    } catch (const Error& e) {
      for (Started& check : batch) {
        check.row.unserved = false;
        check.row.exit = "not started";
        check.row.failure = std::string("its reference check was not started: ") + e.what();
        land(check.index, std::move(check.row), check.progress);
      }
      return;
    }
    Started started;
    started.batch = std::move(batch);
    started_[label] = std::move(started);
  }

  // The row of a task that needs no run (finished before, not derived, not served, a run dir
  // of another task), or nullopt once the task was started on the executor.
  std::optional<report::SuiteRow> start_task(size_t index, const SuiteTask& task,
                                             const std::string& progress) {
    report::SuiteRow row;
    row.name = task.label;
    row.task_path = task.task_path.string();
    fs::path run_dir = suite_dir_ / task.label;
    row.run_dir = run_dir.string();
    row.log_path = (suite_dir_ / "logs" / (task.label + ".log")).string();
    const fs::path derived = derived_task_path(suite_dir_, task.label);
    if (fs::exists(run_dir)) {
      if (!run_is_of_task(run_dir, task.task_path) && !run_is_of_task(run_dir, derived)) {
        row.failure = run_dir.string() +
                      " holds a run of another task; not overwritten "
                      "(choose another --suite-dir)";
        return row;
      }
      if (read_result(run_dir, row)) {
        row.resumed = true;
        row.wall_s = nlohmann::json::parse(read_file(run_dir / "result.json")).value("wall_s", 0.0);
        say(progress + ": already complete in " + run_dir.string() + " (result.json), not re-run");
        executor_.settle_finished(task.label);
        return row;
      }
      row.failure.clear();
    }
    // Unfinished (or not begun: a job may run before its run directory exists).
    fs::path task_file = task.task_path;
    const auto problem = problems_.find(task.label);
    std::optional<std::pair<std::string, std::string>> unserved;
    if (problem != problems_.end() && problem->second.error.empty()) {
      task_file = problem->second.toml_path;  // derived up front: the child does not derive
      if (suite_generator(optimize_args_) == "templates") unserved = unserved_reason(task_file);
    }
    executor::TaskLaunch running{task.label, {}, run_dir, row.log_path, options_.task_timeout_s,
                                 ""};
    const bool checks = unserved && !options_.skip_reference_check;  // no optimize: a check
    if (!checks && executor_.adopt_running(running)) {
      say(progress + ": still running from an earlier session of the suite; followed again");
      started_[task.label] = Started{index, progress, std::move(row), {}, {}};
      return std::nullopt;
    }
    if (fs::exists(run_dir)) {
      fs::path aside = move_aside(suite_dir_, run_dir, task.label);
      say(progress + ": " + run_dir.string() + " is unfinished; moved to " + aside.string() +
          " and run again");
      row.failure.clear();
    }
    if (problem != problems_.end() && !problem->second.error.empty()) {
      return underived_row(std::move(row), problem->second);
    }
    if (unserved) {  // its reference runs on the executor (a job of its own under slurm)
      say(progress + ": not served: " + unserved->first);
      row = unserved_row(std::move(row), *unserved);
      if (!checks ||
          read_back_reference_check(check_setup(task.label), task_file, row,
                                    [&](const std::string& line) { say(progress + ": " + line); })) {
        return row;
      }
      queued_checks_.push_back(Started{index, progress, std::move(row), {}, task_file});
      if (queued_checks_.size() >=
          checks_per_batch(executor_.free_slots() + executor_.in_flight())) {
        start_checks();
      }
      return std::nullopt;
    }
    say(progress + ": " + (options_.executor == "local" ? "optimizing " : "submitting ") +
        task_file.string());
    executor::TaskLaunch launch;
    launch.label = task.label;
    launch.argv = {self_path(), "optimize", task_file.string(), "--run-dir", run_dir.string()};
    launch.argv.insert(launch.argv.end(), optimize_args_.begin(), optimize_args_.end());
    launch.run_dir = run_dir;
    launch.log_path = row.log_path;
    launch.timeout_s = options_.task_timeout_s;
    launch.echo_prefix = options_.verbose ? "  " + task.label + ": " : "";
    try {
      executor_.start(launch);
    } catch (const Error& e) {
      row.exit = "not started";
      row.failure = e.what();
      return row;
    }
    started_[task.label] = Started{index, progress, std::move(row), {}, {}};
    return std::nullopt;
  }

  // The row of a task whose run ended on the executor.
  report::SuiteRow end_row(report::SuiteRow row, const executor::TaskEnd& end) const {
    const fs::path run_dir = row.run_dir;
    row.wall_s = end.wall_s;
    if (!end.note.empty()) say(row.name + ": " + end.note);
    read_run_info(run_dir, row);
    if (end.timed_out) {
      row.exit = fmt::format("timed out after {:g} s", options_.task_timeout_s);
      row.failure = "killed at the --task-timeout-s limit; what it wrote stays in " + row.run_dir;
      if (!end.ended_by.empty()) row.failure = end.ended_by + "; " + row.failure;
      return row;
    }
    if (end.stopped) {
      row.exit = "stopped";
      row.failure = "the suite was stopped (" + executor::suite_stop_cause() + ") while this task ran";
      return row;
    }
    if (!end.status) {
      row.exit = "ended by the executor";
      row.failure = end.ended_by;
      return row;
    }
    row.exit = end.status->describe();
    // 130: an llm run stopped early by the model budget or Ctrl-C still writes its result.json;
    // 3: a run that found no correct candidate.
    bool ended_normally = end.status->exited && (end.status->exit_code == 0 ||
                                                 end.status->exit_code == 3 ||
                                                 end.status->exit_code == 130);
    if (!read_result(run_dir, row) && !ended_normally) {
      row.failure = end.last_error.empty() ? "kforge optimize failed" : end.last_error;
    }
    return row;
  }

  // The row of a problem that could not be derived: the derivation's message, also in its log.
  static report::SuiteRow underived_row(report::SuiteRow row, const SuiteProblem& problem) {
    row.exit = "not derived";
    row.failure = problem.error;
    std::ofstream(row.log_path) << "deriving the task of " << row.task_path
                                << " failed: " << problem.error << "\n";
    return row;
  }

  SuiteReferenceCheck check_setup(const std::string& label) const {
    return {self_path(), suite_dir_, reference_check_args(optimize_args_), options_.task_timeout_s,
            options_.verbose ? "  " + label + ": " : ""};
  }

  static std::string self_path() {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec)
      throw Error("suite: cannot find the kforge executable (/proc/self/exe): " + ec.message());
    return self.string();
  }

  void write_outputs() {
    report::SuiteMetrics m = metrics();
    write_file_atomically(
        suite_dir_ / "suite.json",
        report::suite_json(rows_, m, suite_dir_.string(), optimize_args_).dump(2) + "\n");
    write_file_atomically(suite_dir_ / "suite.md", report::render_suite_markdown(rows_, m));
    write_file_atomically(suite_dir_ / "suite.html",
                          report::render_suite_html(rows_, m, suite_dir_.string()));
  }

  // A task on the executor, waiting for its row.
  struct Started {
    size_t index = 0;
    std::string progress;
    report::SuiteRow row;  // what is known before it runs (paths, name)
    /// A batch of reference checks (suite_reference_check.h): its tasks, each with its row;
    /// empty for an optimize.
    std::vector<Started> batch;
    fs::path task_file;  // a queued check's task file
  };

  const SuiteCommandOptions& options_;
  std::vector<std::string> optimize_args_;
  fs::path suite_dir_;
  executor::Executor& executor_;
  std::vector<std::optional<report::SuiteRow>> slots_;  // by task index: landed rows
  std::map<std::string, Started> started_;              // by label (a batch's label)
  std::vector<Started> queued_checks_;                  // unserved tasks awaiting their batch
  std::vector<report::SuiteRow> rows_;                  // the landed rows, in task order
  std::map<std::string, SuiteProblem> problems_;  // by label: the derived PyTorch problems
};

SuiteRunner::SuiteRunner(const SuiteCommandOptions& options, std::vector<std::string> optimize_args,
                         fs::path suite_dir, executor::Executor& executor)
    : impl_(std::make_unique<Impl>(options, std::move(optimize_args), std::move(suite_dir),
                                   executor)) {}

SuiteRunner::~SuiteRunner() = default;

bool SuiteRunner::derive_problems(const std::vector<SuiteTask>& tasks) {
  return impl_->derive_problems(tasks);
}

bool SuiteRunner::run(const std::vector<SuiteTask>& tasks) { return impl_->run(tasks); }

const std::vector<report::SuiteRow>& SuiteRunner::rows() const { return impl_->rows(); }

report::SuiteMetrics SuiteRunner::metrics() const { return impl_->metrics(); }

nlohmann::json SuiteRunner::json() const { return impl_->json(); }

}  // namespace kforge::cli

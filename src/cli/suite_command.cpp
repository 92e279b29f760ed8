#include "cli/suite_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/option_source.h"
#include "cli/suite_executor.h"
#include "cli/suite_problems.h"
#include "cli/suite_reference_check.h"
#include "cli/suite_rows.h"
#include "cli/suite_tasks.h"
#include "cli/validators.h"
#include "common/error.h"
#include "common/files.h"
#include "executor/child.h"
#include "process/subprocess.h"
#include "report/run_directory.h"
#include "report/suite_html.h"
#include "report/suite_report.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;
using executor::suite_stopped;
namespace {

// optimize's options that the suite sets itself or that make no sense for many tasks.
const std::set<std::string> kNotPassedThrough = {"--help", "--run-dir", "--json", "--replay"};

// The optimize arguments the user gave to the suite, in declaration order.
std::vector<std::string> collect_optimize_args(const SuiteCommandOptions& options) {
  std::vector<std::string> args;
  for (const std::string& name : options.passthrough) {
    if (auto flag = options.passthrough_flags.find(name); flag != options.passthrough_flags.end()) {
      if (flag->second > 0) args.push_back(name);
      continue;
    }
    auto values = options.passthrough_values.find(name);
    if (values == options.passthrough_values.end()) continue;
    for (const std::string& value : values->second) {
      args.push_back(name);
      args.push_back(value);
    }
  }
  return args;
}

// Refuses, before any task runs, what `kforge optimize` would refuse for every task: the same
// option table parses the same arguments.
void check_optimize_args(AddOptimizeFunction add_optimize, const std::vector<std::string>& args,
                         const fs::path& some_task) {
  CLI::App probe;
  OptimizeCommandOptions ignored;
  add_optimize(probe, ignored);
  std::vector<std::string> argv = {"optimize", some_task.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin(), argv.end());  // CLI11 takes the arguments last first
  try {
    probe.parse(argv);
  } catch (const CLI::ParseError& e) {
    throw UsageError("suite: an option passed to kforge optimize was refused: " +
                name_environment_source(probe, args, e.what()));
  }
}

// True when the optimize arguments (or KFORGE_BASELINE, which every child reads) ask for
// --baseline compile.
bool asks_compile_baseline(const std::vector<std::string>& args) {
  std::string value;
  if (const char* env = std::getenv("KFORGE_BASELINE"); env != nullptr) value = env;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--baseline") value = args[i + 1];
  }
  return value == "compile";
}

// Refuses --baseline compile before any task runs where this PyTorch cannot compile: every
// PyTorch problem of the suite would refuse it alike (cli/optimize_baseline.h).
void check_compile_baseline(const std::vector<std::string>& args,
                            const std::vector<SuiteTask>& tasks) {
  if (!asks_compile_baseline(args)) return;
  const bool any_problem = std::any_of(tasks.begin(), tasks.end(), [](const SuiteTask& task) {
    return is_torch_problem(task.task_path.string());
  });
  if (!any_problem) return;
  if (const std::string why = torch_compile_support(); !why.empty()) {
    throw Error("suite: --baseline compile: " + why + "; use --baseline eager (the default), or "
                "set KFORGE_PYTHON to a Python with PyTorch 2.x");
  }
  // The children ask the same Python: they need not import torch once more to hear the answer
  // (3-4 s of each child on the H200). Set before any child or thread starts.
  ::setenv("KFORGE_TORCH_COMPILE_SUPPORT", torch_python().c_str(), 1);
}

class SuiteRunner {
 public:
  SuiteRunner(const SuiteCommandOptions& options, std::vector<std::string> optimize_args,
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
      row.failure = "the suite was stopped (Ctrl-C) while this task ran";
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

fs::path default_suite_dir(const std::vector<std::string>& inputs) {
  fs::path first = fs::absolute(inputs.front()).lexically_normal();
  if (!first.has_filename()) first = first.parent_path();
  std::string name = fs::is_directory(first) ? first.filename().string() : first.stem().string();
  return report::RunDirectory::default_path("suites", name.empty() ? "suite" : name);
}

// Says so when an existing suite ran with other optimize options: its finished tasks are kept.
void warn_if_options_changed(const fs::path& suite_dir, const std::vector<std::string>& args) {
  try {
    nlohmann::json previous = nlohmann::json::parse(read_file(suite_dir / "suite.json"));
    auto before = previous.at("optimize_args").get<std::vector<std::string>>();
    if (before != args) {
      std::cerr << "kforge: suite: note: " << suite_dir.string()
                << " was run with other optimize options; its finished tasks are kept as they "
                   "are\n";
    }
  } catch (const std::exception&) {
    // No readable suite.json: nothing to compare with.
  }
}

}  // namespace

void add_suite_command(CLI::App& app, SuiteCommandOptions& options,
                       AddOptimizeFunction add_optimize) {
  CLI::App* suite = app.add_subcommand(
      "suite", "Optimize every task of a folder; report correct %, fast_p and geomean speedup");
  suite
      ->add_option("tasks", options.inputs,
                   "Folders of tasks (every task.toml and PyTorch problem .py below, sorted) or "
                   "task files")
      ->required();
  suite
      ->add_option("--suite-dir", options.suite_dir,
                   "Where the suite goes: one run directory per task, logs/, suite.json, "
                   "suite.md (default suites/<name>-<time>); an existing one is continued")
      ->envname("KFORGE_SUITE_DIR");
  suite
      ->add_option("--task-timeout-s", options.task_timeout_s,
                   "Wall-clock limit of one task's optimize, seconds (> 0)")
      ->envname("KFORGE_TASK_TIMEOUT_S")
      ->check(positive_number())
      ->capture_default_str();
  suite
      ->add_option("--derive-timeout-s", options.derive_timeout_s,
                   "Wall-clock limit of one PyTorch problem's derivation, seconds (> 0)")
      ->envname("KFORGE_DERIVE_TIMEOUT_S")
      ->check(positive_number())
      ->capture_default_str();
  suite->add_flag("--no-reference-check", options.skip_reference_check,
                  "Do not run the reference of a PyTorch problem no generator serves (by "
                  "default its row gets the reference's time from `kforge task --check`, or why "
                  "it does not run)");
  add_executor_options(*suite, options);
  suite->add_flag("--verbose", options.verbose, "Echo each task's optimize output to stderr");
  suite->add_flag("--json", options.json, "Print suite.json instead of the table");

  // Every option of `kforge optimize` is accepted and passed on. No environment variable is
  // declared here: the children inherit the environment and read KFORGE_* themselves.
  CLI::App probe;
  OptimizeCommandOptions defaults;
  add_optimize(probe, defaults);
  for (const CLI::Option* option : probe.get_subcommand("optimize")->get_options()) {
    std::string name = option->get_name();
    if (!option->nonpositional() || kNotPassedThrough.count(name) ||
        suite->get_option_no_throw(name) != nullptr) {
      continue;
    }
    std::string description = option->get_description();
    if (!option->get_default_str().empty()) description += " [" + option->get_default_str() + "]";
    CLI::Option* added = nullptr;
    if (option->get_expected_max() == 0) {
      added = suite->add_flag(name, options.passthrough_flags[name], description);
    } else {
      added = suite->add_option(name, options.passthrough_values[name], description)
                  ->allow_extra_args(false)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                  ->type_name(option->get_type_name());
    }
    added->group("Passed to each kforge optimize");
    options.passthrough.push_back(name);
  }
}

int run_suite(const SuiteCommandOptions& options, AddOptimizeFunction add_optimize) {
  return run_suite(options, add_optimize, nullptr);
}

int run_suite(const SuiteCommandOptions& options, AddOptimizeFunction add_optimize,
              std::unique_ptr<executor::Executor> task_executor) {
  if (!(options.task_timeout_s > 0.0)) {
    throw Error(fmt::format("--task-timeout-s: expected a number of seconds > 0, got {}",
                            options.task_timeout_s));
  }
  if (!(options.derive_timeout_s > 0.0)) {
    throw Error(fmt::format("--derive-timeout-s: expected a number of seconds > 0, got {}",
                            options.derive_timeout_s));
  }
  std::vector<SuiteTask> tasks = discover_suite_tasks(options.inputs);
  std::vector<std::string> optimize_args = collect_optimize_args(options);
  check_optimize_args(add_optimize, optimize_args, tasks.front().task_path);
  check_compile_baseline(optimize_args, tasks);
  fs::path suite_dir = fs::absolute(options.suite_dir.empty() ? default_suite_dir(options.inputs)
                                                              : fs::path(options.suite_dir))
                           .lexically_normal();
  if (fs::exists(suite_dir) && !fs::is_directory(suite_dir)) {
    throw Error(suite_dir.string() + ": exists and is not a folder (expected a suite directory)");
  }
  if (fs::exists(suite_dir)) warn_if_options_changed(suite_dir, optimize_args);
  std::cerr << "kforge: suite: " << tasks.size() << " task" << (tasks.size() == 1 ? "" : "s")
            << " -> " << suite_dir.string() << "\n";

  if (!task_executor) task_executor = make_suite_executor(options, suite_dir, optimize_args);
  executor::StopSignalGuard guard;
  SuiteRunner runner(options, optimize_args, suite_dir, *task_executor);
  bool finished = runner.derive_problems(tasks) && runner.run(tasks);
  if (options.json) {
    std::cout << runner.json().dump(2) << "\n";
  } else {
    std::cout << report::render_suite_markdown(runner.rows(), runner.metrics());
  }
  if (!finished) {
    std::cerr << "kforge: suite: stopped after " << runner.rows().size() << " of " << tasks.size()
              << " tasks; run the same command with --suite-dir " << suite_dir.string()
              << " to continue\n";
    return static_cast<int>(ExitCode::interrupted);
  }
  std::cerr << "kforge: suite: wrote " << (suite_dir / "suite.json").string() << " and "
            << (suite_dir / "suite.md").string() << "\n";
  return suite_exit_code(runner.rows());
}

}  // namespace kforge::cli

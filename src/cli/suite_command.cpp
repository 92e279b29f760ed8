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
#include "cli/suite_runner.h"
#include "cli/suite_tasks.h"
#include "cli/torch_fork_server.h"
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
  // Local children's torch reference workers are forked from one process that imported torch
  // (cli/torch_fork_server.h); Slurm jobs run elsewhere and start their own.
  std::unique_ptr<TorchForkServer> fork_server;
  if (options.executor == "local" &&
      std::any_of(tasks.begin(), tasks.end(),
                  [](const SuiteTask& task) { return is_torch_problem(task.task_path); })) {
    std::string why;
    fork_server = TorchForkServer::start(&why);
    if (!fork_server) {
      std::cerr << "kforge: note: suite: torch reference workers start on their own: " << why
                << "\n";
    }
  }
  executor::StopSignalGuard guard;
  SuiteRunner runner(options, optimize_args, suite_dir, *task_executor);
  bool finished = runner.derive_problems(tasks);
  if (finished && fork_server) {
    // Its imports ran alongside the derivation; a child started before it listens would start
    // its worker on its own.
    constexpr double kForkServerReadyS = 120.0;
    if (std::string why; !fork_server->wait_ready(kForkServerReadyS, &why)) {
      std::cerr << "kforge: note: suite: torch reference workers start on their own: " << why
                << "\n";
    } else {
      std::cerr << "kforge: suite: torch reference workers are forked from a process that "
                   "imported torch once ("
                << kTorchForkServerVariable << "=" << fork_server->socket_path() << ")\n";
    }
  }
  finished = finished && runner.run(tasks);
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

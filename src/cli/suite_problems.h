// The PyTorch problems of a `kforge suite`, derived up front in one Python process.
//
// Each problem is derived once, before any task runs, by one `derive --batch` (torch imported
// once for the whole suite: task/torch_task_batch.h); its task is written as the TOML that
// `kforge task -o` writes, SUITE_DIR/derived/<label>.toml, and the task's `kforge optimize`
// child runs that TOML, so it does not derive again. When a suite is continued, a TOML whose
// problem_sha256 is still the file's sha256 is used as it is; a changed problem is derived again.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/suite_tasks.h"

namespace kforge::cli {

/// A problem of the suite once derivation has been settled.
struct SuiteProblem {
  /// The derived task the child runs; the problem file itself when the TOML does not read back
  /// into the derived task (the child then derives it again); empty when the derivation failed.
  std::filesystem::path toml_path;
  std::string error;                // the derivation's message (names the file), else empty
  bool reused = false;              // toml_path is an earlier suite run's, same problem bytes
  double derive_s = 0.0;            // the problem's derivation (wall, in its child); 0 if reused
};

struct SuiteProblemOptions {
  std::string python;  // the batch's Python; empty: torch_python() (tests give a stand-in)
  double per_problem_timeout_s = 300.0;  // a derivation stopped after this long is its error
  /// Progress lines ("derived 23_Softmax: softmax, 1.2 s").
  std::function<void(const std::string&)> say;
  /// Polled while deriving; true stops (the problems not derived yet get errors).
  std::function<bool()> should_stop;
};

/// SUITE_DIR/derived/<label>.toml: where the derived task of problem `label` goes.
std::filesystem::path derived_task_path(const std::filesystem::path& suite_dir,
                                        const std::string& label);

/// True when `task` is a PyTorch problem file (its task is derived) rather than a TOML task.
bool is_suite_problem(const SuiteTask& task);

/// Settles every problem of `tasks` (is_suite_problem) for which `needed(task)` is true (the
/// suite skips the ones whose run finished earlier): reuses derived_task_path when it loads and
/// its problem_sha256 is the file's sha256, else derives it (all together, one batch) and writes
/// the TOML atomically. Returns label -> SuiteProblem for those problems. A failed derivation is
/// that problem's `error`, never an exception; writes SUITE_DIR/derived/derivation.json (which
/// problems were derived, reused or failed, and the seconds each derivation took).
std::map<std::string, SuiteProblem> prepare_suite_problems(
    const std::vector<SuiteTask>& tasks, const std::filesystem::path& suite_dir,
    const std::function<bool(const SuiteTask&)>& needed, const SuiteProblemOptions& options);

/// The value the optimize arguments `args` give option `name` ("--x V" or "--x=V"; the last
/// one wins), else $`env` when set and not empty (the children read it too), else `fallback`.
std::string forwarded_value(const std::vector<std::string>& args, const std::string& name,
                            const char* env, std::string fallback);

/// The options of `kforge task --check` that run a task's reference where the suite's optimize
/// children would run it: --backend and --baseline (as forwarded_value finds them), and
/// --device (--device, else the first of --devices, else left to the default).
std::vector<std::string> reference_check_args(const std::vector<std::string>& args);

/// The generator a suite's children use: --generator in the optimize arguments `args` (as
/// "--generator X" or "--generator=X"), else $KFORGE_GENERATOR (every child reads it), else
/// "templates".
std::string suite_generator(const std::vector<std::string>& args);

/// Why the templates generator cannot serve the derived task at `toml`: a PyTorch problem that
/// no built-in family computes (its family is empty). {one line for the suite's table, naming
/// the families tried; the reason each did not fit, a line each, for the task's log}. nullopt
/// when a family serves it, when `toml` is a problem file (the child derives it), or when it
/// does not load (the child then says why).
std::optional<std::pair<std::string, std::string>> unserved_reason(const std::filesystem::path& toml);

}  // namespace kforge::cli

// The rows and tables of `kforge suite`: one row per task, read from the task's result.json (the
// schema OptimizeResult::to_json and run_optimize write), and the views derived from the rows and
// the aggregate (report/suite_metrics.h): suite.json, suite.md and the console table.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/suite_metrics.h"

namespace kforge::report {

/// One task of a suite: where it ran, how its run ended and what it found.
struct SuiteRow {
  std::string name;       // the task's label in the suite (its folder name), unique in the suite
  std::string task_path;  // the task file, absolute
  std::string run_dir;    // the task's run directory (SUITE_DIR/<name>)
  std::string log_path;   // the optimize child's stdout and stderr
  /// True when the run finished and wrote a result.json the suite could read; false when the
  /// child failed (bad task, crash, timeout, Ctrl-C) or its result.json was unreadable.
  bool completed = false;
  bool resumed = false;  // result.json came from an earlier suite run and was not re-run
  std::string task;      // the task's own name (result.json "task"), empty when unknown
  std::string backend;
  /// What served the task: its generator ("templates", "llm") and kernel family (the derived
  /// task's matched family for a PyTorch problem; "" when none matched), from result.json, or
  /// from run.json when the run did not finish; empty when unknown.
  std::string generator;
  std::string family;
  std::string baseline = "eager";  // result.json "baseline": "eager" or "compile"
  bool correct = false;  // a candidate passed the gate and was timed at the final rung
  double speedup = 0.0;  // final rung: reference median / best median (correct tasks only)
  double speedup_ci_low = 0.0;
  double speedup_ci_high = 0.0;
  double speedup_ci_level = 0.95;
  /// --baseline compile: the best's speedup over torch.compile of the reference at the final
  /// rung (result.json /final/speedup_vs_compile), when there is one; its status ("measured",
  /// "cached", "failed", "not_applicable"; "" under eager) and a note: why there is none, or
  /// "cached from <when>" for a ratio the baseline cache gave.
  std::optional<double> compile_speedup;
  double compile_ci_low = 0.0;
  double compile_ci_high = 0.0;
  std::string compile_status;
  std::string compile_note;
  std::string best;    // id of the best candidate
  int candidates = 0;  // evaluated
  int correct_candidates = 0;
  double wall_s = 0.0;  // the child's wall time (the run's own wall_s for a resumed task)
  std::optional<double> device_s;      // see device_seconds()
  std::optional<double> llm_cost_usd;  // result.json llm.cost_usd
  std::string exit;  // how the child ended: "exit code 1", "timed out after 60 s", ...
  /// Why the task is not correct: the child's error, the timeout, "no candidate passed the
  /// correctness gate", ...; empty for a correct task.
  std::string failure;
  /// True when no run was started because the suite's generator cannot write a kernel for the
  /// task: a PyTorch problem no built-in family computes, under the templates generator
  /// (`--generator llm` would). Not correct, and not an error of a run.
  bool unserved = false;
  /// The reference's median time on the timed workload, ms: the final rung's (result.json
  /// /final/reference/median_ms) for a correct task, the reference check's
  /// (`kforge task --check`, cli/reference_check.h) for a task not served; nullopt otherwise.
  std::optional<double> reference_ms;
  /// For a task not served: "ran" when the suite's reference check ran its reference, "skipped"
  /// (--no-reference-check), else empty.
  std::string reference_check;

  /// True when the run did not finish (bad task file, crash, timeout, Ctrl-C, unreadable
  /// result.json): an error of the run, reported apart from a run that found no correct
  /// candidate and from a task not served, though all count as not correct in the metrics.
  bool errored() const { return !completed && !unserved; }
  /// "correct", "not correct" (the run finished without a correct candidate), "not served"
  /// (unserved) or "error".
  std::string status() const;

  SuiteTaskOutcome outcome() const;
  /// The row's outcome against torch.compile: correct with compile_speedup when it has one;
  /// nullopt (left out of the compile aggregate) when it is correct without one (its compile
  /// failed) or torch.compile does not apply; otherwise not correct, as in outcome().
  std::optional<SuiteTaskOutcome> compile_outcome() const;
  nlohmann::json to_json() const;
};

/// The aggregate against torch.compile: the metrics over the rows' compile_outcome()s, and how
/// many rows were left out. nullopt when no row ran with --baseline compile.
struct CompileAggregate {
  SuiteMetrics metrics;
  int left_out = 0;
};
std::optional<CompileAggregate> compile_aggregate(const std::vector<SuiteRow>& rows);

/// Fills `row`'s result fields (completed, task, backend, generator, family, correct, speedup and
/// its interval, the compile baseline's, best, candidates, device_s, llm_cost_usd, failure when
/// incorrect) from a result.json.
/// Throws Error naming the missing or mistyped field when `result` does not have result.json's
/// shape (an object with "candidates", "best", and "final.speedup.speedup" when best is set).
void read_result_into(const nlohmann::json& result, SuiteRow& row);

/// Fills `row`'s generator and family, where still empty, from a run.json (a run that started
/// and did not finish has one; what it lacks is left empty).
void read_run_into(const nlohmann::json& run, SuiteRow& row);

/// Device-seconds a run reports in its result.json, if any: the number at "/device_s" or at
/// "/budget/spent/device_s" (the budget report of issue 5), else nullopt.
std::optional<double> device_seconds(const nlohmann::json& result);

/// suite.json: {"kforge_version", "suite_dir", "optimize_args", "tasks": [rows],
/// "aggregate": SuiteMetrics::to_json(), "aggregate_vs_compile": the compile_aggregate's metrics
/// plus "left_out" (null without --baseline compile), "updated"}.
nlohmann::json suite_json(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics,
                          const std::string& suite_dir,
                          const std::vector<std::string>& optimize_args);

/// The suite's table in Markdown (also what the console prints): the aggregate row (tasks,
/// correct, fast_0/1/1.5/2, geomean speedup with its interval; with --baseline compile a second
/// row against torch.compile), the cost per task, one row per task (its speedups, the generator
/// and family that served it, why it got no correct candidate), the tasks whose run errored with
/// the error and log, the tasks that finished without a correct candidate, and the correct
/// tasks without a torch.compile baseline with why.
std::string render_suite_markdown(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics);

}  // namespace kforge::report

// The engine of `kforge suite` (suite_command.h): derives the suite's PyTorch problems up front,
// starts each task on the executor in order as its slots allow (an optimize child or job per
// served task; the unserved ones' reference checks in batches, suite_reference_check.h; a task
// finished in an earlier session read back), and lands each row as its task ends, rewriting
// suite.json, suite.md and suite.html every time.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/suite_command.h"
#include "cli/suite_problems.h"
#include "cli/suite_tasks.h"
#include "executor/executor.h"
#include "report/suite_report.h"

namespace kforge::cli {

class SuiteRunner {
 public:
  /// `optimize_args`: what every optimize child gets after its task and --run-dir;
  /// `suite_dir` absolute; `executor` outlives the runner.
  SuiteRunner(const SuiteCommandOptions& options, std::vector<std::string> optimize_args,
              std::filesystem::path suite_dir, executor::Executor& executor);
  ~SuiteRunner();
  SuiteRunner(const SuiteRunner&) = delete;
  SuiteRunner& operator=(const SuiteRunner&) = delete;

  /// Derives the PyTorch problems whose run has not finished (one Python process for all);
  /// false when stopped by a signal meanwhile.
  bool derive_problems(const std::vector<SuiteTask>& tasks);
  /// Starts every task in order on the executor and lands each row as its task ends; false
  /// when stopped by a signal before the end (the tasks in flight are cancelled, their rows
  /// say so).
  bool run(const std::vector<SuiteTask>& tasks);
  /// The landed rows, in task order.
  const std::vector<report::SuiteRow>& rows() const;
  report::SuiteMetrics metrics() const;
  /// suite.json's content.
  nlohmann::json json() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::cli

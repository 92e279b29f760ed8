// What `kforge optimize` writes and prints when its search has ended: result.json (last, so its
// presence marks a finished run), report.md, the console summary or --json, and the exit code.
// Split from optimize_command.cpp, which sets the run up.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/llm_session.h"
#include "report/run_directory.h"
#include "search/optimizer.h"

namespace kforge::cli {

/// What the report says about the run besides the optimizer's result.
struct FinishedRun {
  std::string task;       // the task's name
  std::string family;     // its kernel family ("" when none)
  std::string backend;    // "cpu", "cuda"
  std::string generator;  // "templates", "llm"
  std::string language;   // "native", "cuda", "triton" (core/kernel_language.h)
  std::vector<int> devices;            // one candidate worker each
  std::filesystem::path run_path;      // for the --resume hint
  bool json = false;                   // --json: print result.json instead of the summary
};

/// Writes report.md and (unless the final timing was skipped) result.json into `run_dir`,
/// prints the summary (or the JSON) on stdout and the LLM usage line on stderr, and returns the
/// exit code: 130 after an interruption (with the --resume command to continue), 3 when no
/// candidate was correct, else 0. `llm` may be null (no LLM used).
int report_finished_run(const search::OptimizeResult& result, const FinishedRun& run,
                        LlmSession* llm, report::RunDirectory& run_dir);

}  // namespace kforge::cli

#include "cli/optimize_report.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli/commands.h"
#include "common/error.h"
#include "report/run_html.h"
#include "report/solution_export.h"
#include "report/summary.h"

namespace kforge::cli {
namespace {

// A PyTorch problem's finished run with a best kernel gets solution.py (a KernelBench ModelNew),
// written from result.json, so after it. Returns its path, or "" when there is none; a failure
// is a warning: the run and its best kernel stand without it (`kforge export` retries).
std::string write_solution(const nlohmann::json& result, report::RunDirectory& run_dir) {
  if (result.at("best").is_null() || !report::is_torch_run(run_dir.path())) return "";
  const std::filesystem::path output = run_dir.path() / "solution.py";
  try {
    report::write_kernelbench_solution(run_dir.path(), output);
  } catch (const Error& e) {
    std::cerr << "kforge: warning: no solution.py: " << e.what() << "\n";
    return "";
  }
  return output.string();
}

}  // namespace

int report_finished_run(const search::OptimizeResult& result, const FinishedRun& run,
                        LlmSession* llm, report::RunDirectory& run_dir) {
  nlohmann::json json = result.to_json();
  json["workers"] = run.devices.size();
  if (backends::get_backend(run.backend).can.several_devices) json["devices"] = run.devices;
  json["task"] = run.task;
  json["finished"] = report::utc_now_iso8601();
  json["generator"] = run.generator;
  json["language"] = run.language;
  json["family"] = run.family;
  if (llm != nullptr) {
    json["llm"] = llm->usage_json();
    std::cerr << llm->usage_line() << "\n";
  }
  run_dir.write_text("report.md", report::render_markdown(json, run.task));
  std::string solution;
  if (!result.final_skipped) {
    run_dir.write_json("result.json", json);  // its presence marks a finished run
    solution = write_solution(json, run_dir);
  }
  if (std::string problem = report::write_run_html(run_dir.path()); !problem.empty()) {
    std::cerr << "kforge: warning: " << problem << "\n";
  }
  if (run.json) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << report::render_console_summary(json, run.task);
    if (!solution.empty()) std::cout << "  solution:   " << solution << " (KernelBench ModelNew)\n";
  }
  if (result.interrupted) {
    std::cerr << "kforge: interrupted; continue with: kforge optimize --resume "
              << run.run_path.string() << "\n";
    return 130;
  }
  // A script running `kforge optimize TASK && use best.cpp` must not go on without a kernel: no
  // correct candidate exits 3, like a suite with such a task (best.cpp was not written).
  if (json.at("best").is_null()) {
    std::cerr << "kforge: no correct candidate: no best kernel was written (exit code 3)\n";
    return static_cast<int>(ExitCode::not_all_correct);
  }
  return 0;
}

}  // namespace kforge::cli

#include "cli/suite_reference_check.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "executor/child.h"
#include "common/files.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// The report at `path` when it is a check that ran for this very task (same task hash), else
// null: a missing, unreadable or failed report, or one of an edited task, is run again.
nlohmann::json earlier_check(const fs::path& path, const fs::path& task_file) {
  try {
    nlohmann::json report = nlohmann::json::parse(read_file(path));
    if (report.value("ok", false) &&
        report.value("task_hash", "") == task_hash(load_task(task_file.string()))) {
      return report;
    }
  } catch (const std::exception&) {
    // Run it again.
  }
  return nullptr;
}

void record_ran(const nlohmann::json& report, report::SuiteRow& row) {
  row.reference_ms = report.at("reference_ms").get<double>();
  row.reference_check = "ran";
}

}  // namespace

fs::path reference_check_path(const fs::path& suite_dir, const std::string& label) {
  return suite_dir / "checks" / (label + ".json");
}

void check_unserved_reference(const SuiteReferenceCheck& setup, const fs::path& task_file,
                              report::SuiteRow& row,
                              const std::function<void(const std::string&)>& say) {
  const fs::path report_path = reference_check_path(setup.suite_dir, row.name);
  if (nlohmann::json earlier = earlier_check(report_path, task_file); !earlier.is_null()) {
    record_ran(earlier, row);
    // The row's cost is what the check cost when it ran: a resumed suite's totals stay whole.
    row.wall_s += earlier.value("wall_s", 0.0);
    say(fmt::format("its reference ran in an earlier suite run: {:.4f} ms ({})",
                    *row.reference_ms, report_path.string()));
    return;
  }
  std::error_code ec;
  fs::create_directories(report_path.parent_path(), ec);
  fs::remove(report_path, ec);  // a report that is there afterwards is this child's
  std::vector<std::string> argv = {setup.kforge, "task", task_file.string(), "--check",
                                   "--report", report_path.string()};
  argv.insert(argv.end(), setup.check_args.begin(), setup.check_args.end());
  const fs::path log = setup.suite_dir / "logs" / (row.name + ".check.log");
  say("running its reference (kforge task --check; log " + log.string() + ")");
  executor::ChildRun child = executor::run_child(argv, log, setup.timeout_s, setup.echo_prefix);
  row.wall_s += child.wall_s;
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(read_file(report_path));
  } catch (const std::exception&) {
    report = nullptr;  // killed, or crashed before writing it
  }
  if (!child.timed_out && !child.stopped && report.is_object() && report.value("ok", false)) {
    record_ran(report, row);
    return;
  }
  row.unserved = false;  // a reference that does not run is the task's error, whatever serves it
  if (child.timed_out) {
    row.exit = fmt::format("timed out after {:g} s", setup.timeout_s);
    row.failure = "its reference check was killed at the --task-timeout-s limit (log " +
                  log.string() + ")";
  } else if (child.stopped) {
    row.exit = "stopped";
    row.failure = "the suite was stopped (Ctrl-C) while this task's reference ran";
  } else {
    row.exit = "reference check failed";
    std::string error = report.is_object() ? report.value("error", "") : "";
    if (error.empty()) error = child.last_error.empty() ? "kforge task --check failed" : child.last_error;
    row.failure = "its reference does not run: " + error;
  }
}

}  // namespace kforge::cli

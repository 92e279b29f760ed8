#include "cli/suite_reference_check.h"

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
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

fs::path check_log(const fs::path& suite_dir, const std::string& label) {
  return suite_dir / "logs" / (label + ".check.log");
}

}  // namespace

report::SuiteRow unserved_row(report::SuiteRow row,
                              const std::pair<std::string, std::string>& why) {
  row.unserved = true;
  row.exit = "not run";
  row.generator = "templates";
  row.failure = why.first;
  std::ofstream(row.log_path) << "not run: " << why.first << "\n"
                              << (why.second.empty() ? "" : "families tried:\n" + why.second);
  return row;
}

fs::path reference_check_path(const fs::path& suite_dir, const std::string& label) {
  return suite_dir / "checks" / (label + ".json");
}

executor::TaskLaunch reference_check_launch(const SuiteReferenceCheck& setup,
                                            const fs::path& task_file, const std::string& label) {
  executor::TaskLaunch launch;
  launch.label = label;
  launch.argv = {setup.kforge, "task", task_file.string(), "--check", "--report",
                 reference_check_path(setup.suite_dir, label).string()};
  launch.argv.insert(launch.argv.end(), setup.check_args.begin(), setup.check_args.end());
  launch.log_path = check_log(setup.suite_dir, label);
  launch.timeout_s = setup.timeout_s;
  launch.echo_prefix = setup.echo_prefix;
  launch.kind = executor::TaskKind::reference_check;
  return launch;
}

bool start_reference_check(executor::Executor& executor, const SuiteReferenceCheck& setup,
                           const fs::path& task_file, report::SuiteRow& row,
                           const std::function<void(const std::string&)>& say) {
  const fs::path report_path = reference_check_path(setup.suite_dir, row.name);
  if (nlohmann::json earlier = earlier_check(report_path, task_file); !earlier.is_null()) {
    record_ran(earlier, row);
    // The row's cost is what the check cost when it ran: a resumed suite's totals stay whole.
    row.wall_s += earlier.value("wall_s", 0.0);
    say(fmt::format("its reference ran in an earlier suite run: {:.4f} ms ({})",
                    *row.reference_ms, report_path.string()));
    return false;
  }
  const executor::TaskLaunch launch = reference_check_launch(setup, task_file, row.name);
  if (executor.adopt_running(launch)) {
    say("its reference check still runs from an earlier session of the suite; followed again");
    return true;
  }
  std::error_code ec;
  fs::create_directories(report_path.parent_path(), ec);
  fs::remove(report_path, ec);  // a report that is there afterwards is this check's
  say("running its reference (kforge task --check; log " + launch.log_path.string() + ")");
  try {
    executor.start(launch);
  } catch (const Error& e) {
    row.unserved = false;
    row.exit = "not started";
    row.failure = std::string("its reference check was not started: ") + e.what();
    return false;
  }
  return true;
}

void finish_reference_check(const SuiteReferenceCheck& setup, const executor::TaskEnd& end,
                            report::SuiteRow& row) {
  row.wall_s += end.wall_s;
  const fs::path log = check_log(setup.suite_dir, row.name);
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(read_file(reference_check_path(setup.suite_dir, row.name)));
  } catch (const std::exception&) {
    report = nullptr;  // killed, or crashed before writing it
  }
  if (!end.timed_out && !end.stopped && report.is_object() && report.value("ok", false)) {
    record_ran(report, row);
    return;
  }
  row.unserved = false;  // a reference that does not run is the task's error, whatever serves it
  if (end.timed_out) {
    row.exit = fmt::format("timed out after {:g} s", setup.timeout_s);
    row.failure = "its reference check was killed at the --task-timeout-s limit (log " +
                  log.string() + ")";
    if (!end.ended_by.empty()) row.failure = end.ended_by + "; " + row.failure;
  } else if (end.stopped) {
    row.exit = "stopped";
    row.failure = "the suite was stopped (Ctrl-C) while this task's reference ran";
  } else if (!end.status) {
    row.exit = "ended by the executor";
    row.failure = "its reference check: " + end.ended_by + " (log " + log.string() + ")";
  } else {
    row.exit = "reference check failed";
    std::string error = report.is_object() ? report.value("error", "") : "";
    if (error.empty()) {
      error = end.last_error.empty() ? "kforge task --check failed" : end.last_error;
    }
    row.failure = "its reference does not run: " + error;
  }
}

}  // namespace kforge::cli

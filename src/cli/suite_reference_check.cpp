#include "cli/suite_reference_check.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/reference_check_batch.h"
#include "common/error.h"
#include "common/files.h"
#include "executor/child.h"
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

fs::path check_log(const fs::path& suite_dir, const std::string& batch_label) {
  return suite_dir / "logs" / (batch_label + ".log");
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

std::size_t checks_per_batch(std::size_t slots) { return slots <= 1 ? 64 : 16; }

bool read_back_reference_check(const SuiteReferenceCheck& setup, const fs::path& task_file,
                               report::SuiteRow& row,
                               const std::function<void(const std::string&)>& say) {
  const fs::path report_path = reference_check_path(setup.suite_dir, row.name);
  nlohmann::json earlier = earlier_check(report_path, task_file);
  if (earlier.is_null()) {
    say("its reference is checked with the next batch (kforge task --check-batch)");
    return false;
  }
  record_ran(earlier, row);
  // The row's cost is what the check cost when it ran: a resumed suite's totals stay whole.
  row.wall_s += earlier.value("wall_s", 0.0);
  say(fmt::format("its reference ran in an earlier suite run: {:.4f} ms ({})", *row.reference_ms,
                  report_path.string()));
  return true;
}

executor::TaskLaunch reference_check_batch_launch(const SuiteReferenceCheck& setup,
                                                  const std::vector<QueuedCheck>& checks,
                                                  const std::string& label) {
  std::vector<BatchCheck> batch;
  std::error_code ec;
  fs::create_directories(setup.suite_dir / "checks", ec);
  for (const QueuedCheck& check : checks) {
    const fs::path report = reference_check_path(setup.suite_dir, check.label);
    fs::remove(report, ec);  // a report that is there afterwards is this batch's
    batch.push_back({check.label, fs::absolute(check.task_file).string(), report.string()});
  }
  const fs::path batch_file = setup.suite_dir / "checks" / (label + ".batch.json");
  write_check_batch(batch_file.string(), batch);
  executor::TaskLaunch launch;
  launch.label = label;
  launch.argv = {setup.kforge, "task", "--check-batch", batch_file.string()};
  launch.argv.insert(launch.argv.end(), setup.check_args.begin(), setup.check_args.end());
  launch.log_path = check_log(setup.suite_dir, label);
  launch.timeout_s = setup.timeout_s * static_cast<double>(checks.size());
  launch.echo_prefix = setup.echo_prefix;
  launch.kind = executor::TaskKind::reference_check;
  return launch;
}

void finish_reference_checks(const SuiteReferenceCheck& setup, const executor::TaskEnd& end,
                             const std::vector<report::SuiteRow*>& rows) {
  const fs::path log = check_log(setup.suite_dir, end.label);
  std::vector<nlohmann::json> reports;
  double checks_s = 0.0;
  // The last check of the batch that started (wrote its marker or its report): the one in flight
  // if the batch was ended from outside.
  std::optional<size_t> last_started;
  for (size_t i = 0; i < rows.size(); ++i) {
    nlohmann::json report;
    try {
      report = nlohmann::json::parse(read_file(reference_check_path(setup.suite_dir, rows[i]->name)));
    } catch (const std::exception&) {
      report = nullptr;  // the batch was killed, or crashed, before this check's report
    }
    if (report.is_object()) {
      last_started = i;
      checks_s += report.value("wall_s", 0.0);
    }
    reports.push_back(std::move(report));
  }
  const bool ended_from_outside = end.timed_out || end.stopped || !end.status;
  const double share_s =
      rows.empty() ? 0.0 : std::max(0.0, end.wall_s - checks_s) / static_cast<double>(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    report::SuiteRow& row = *rows[i];
    nlohmann::json report = reports[i];
    row.wall_s += share_s + (report.is_object() ? report.value("wall_s", 0.0) : 0.0);
    if (report.is_object() && report.value("ok", false)) {
      record_ran(report, row);  // a report written before a timeout or a stop still counts
      continue;
    }
    // What the check reported as it was cut, said after the ending that cut it: scancel or the
    // timeout signals the batch's workers too, and one that died first fails the check in flight
    // (seen: "torch reference worker died during hello (killed by SIGTERM)") before the batch's
    // own process goes. That is the ending's effect, not the reference's failure.
    std::string cut_report;
    if (report.is_object() && report.value("in_progress", false)) {
      report = nullptr;  // started, never finished: the batch ended during this check
    } else if (report.is_object() && ended_from_outside && last_started == i) {
      cut_report = "; as it was ended, the check reported: " +
                   report.value("error", std::string("no reason given"));
      report = nullptr;
    }
    row.unserved = false;  // a reference that does not run is the task's error, whatever serves it
    if (report.is_object()) {
      row.exit = "reference check failed";
      row.failure = "its reference does not run: " + report.value("error", std::string(
                                                                      "no reason given"));
    } else if (end.timed_out) {
      row.exit = fmt::format("timed out after {:g} s", setup.timeout_s * rows.size());
      row.failure = "its reference check's batch was killed at the --task-timeout-s limit (per "
                    "check) before it checked this task (log " + log.string() + ")" + cut_report;
      if (!end.ended_by.empty()) row.failure = end.ended_by + "; " + row.failure;
    } else if (end.stopped) {
      row.exit = "stopped";
      row.failure = "the suite was stopped (" + executor::suite_stop_cause() +
                    ") while this task's reference ran" + cut_report;
    } else if (!end.status) {
      row.exit = "ended by the executor";
      row.failure = "its reference check: " + end.ended_by + " (log " + log.string() + ")" +
                    cut_report;
    } else {
      row.exit = "reference check failed";
      const std::string error = end.last_error.empty() ? "kforge task --check-batch failed"
                                                       : end.last_error;
      row.failure = "its reference check's batch ended before checking it: " + error +
                    " (log " + log.string() + ")";
    }
  }
}

}  // namespace kforge::cli

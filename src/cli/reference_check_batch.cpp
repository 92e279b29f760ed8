#include "cli/reference_check_batch.h"

#include <chrono>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/optimize_command.h"
#include "common/error.h"
#include "common/files.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

std::string field(const nlohmann::json& entry, const char* name, const std::string& where) {
  const auto found = entry.find(name);
  if (found == entry.end() || !found->is_string() || found->get<std::string>().empty()) {
    throw Error(where + ": field '" + name + "' must be a non-empty string");
  }
  return found->get<std::string>();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<BatchCheck> read_check_batch(const std::string& path) {
  nlohmann::json batch;
  try {
    batch = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a check batch (expected JSON {\"checks\": [...]}): " + e.what());
  }
  if (!batch.is_object() || !batch.contains("checks") || !batch.at("checks").is_array() ||
      batch.at("checks").empty()) {
    throw Error(path + ": expected {\"checks\": [{\"label\", \"task\", \"report\"}, ...]} with "
                "at least one check");
  }
  const fs::path folder = fs::absolute(path).parent_path();
  auto resolved = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? p : (folder / p).lexically_normal().string();
  };
  std::vector<BatchCheck> checks;
  std::set<std::string> reports;
  for (size_t i = 0; i < batch.at("checks").size(); ++i) {
    const nlohmann::json& entry = batch.at("checks")[i];
    const std::string where = fmt::format("{}: checks[{}]", path, i);
    if (!entry.is_object()) throw Error(where + ": expected an object");
    BatchCheck check{field(entry, "label", where), resolved(field(entry, "task", where)),
                     resolved(field(entry, "report", where))};
    if (!reports.insert(check.report_path).second) {
      throw Error(where + ": report " + check.report_path + " is named by an earlier check too");
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

void write_check_batch(const std::string& path, const std::vector<BatchCheck>& checks) {
  nlohmann::json list = nlohmann::json::array();
  for (const BatchCheck& check : checks) {
    list.push_back({{"label", check.label}, {"task", check.task_file},
                    {"report", check.report_path}});
  }
  write_file_atomically(path, nlohmann::json{{"checks", list}}.dump(2) + "\n");
}

int run_check_batch(const std::vector<BatchCheck>& checks, const ReferenceCheckOptions& options,
                    const std::function<void(const std::string&)>& say) {
  std::string why;
  std::string backend;
  try {
    backend = resolve_backend(options.backend, options.device, &why);
  } catch (const std::exception& e) {
    for (const BatchCheck& check : checks) {
      write_file_atomically(check.report_path,
                            failed_check_json(check.task_file, e.what()).dump(2) + "\n");
    }
    throw;
  }
  ReferenceWorkers workers(backend, options.device);
  int ran = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    const BatchCheck& check = checks[i];
    const auto start = std::chrono::steady_clock::now();
    const std::string progress = fmt::format("[{}/{}] {}", i + 1, checks.size(), check.label);
    const nlohmann::json position = {{"index", i}, {"size", checks.size()}};
    std::error_code ec;
    fs::create_directories(fs::path(check.report_path).parent_path(), ec);
    // The marker says which check was in flight if the batch is ended from outside (a timeout,
    // scancel): a failed report written without a later check's marker may be that ending's
    // effect (its workers got the signal first), which finish_reference_checks must tell.
    write_file_atomically(check.report_path,
                          nlohmann::json{{"ok", false},
                                         {"in_progress", true},
                                         {"task_file", check.task_file},
                                         {"batch", position}}
                                  .dump(2) +
                              "\n");
    nlohmann::json report;
    std::string summary;
    try {
      const Task task = load_task(check.task_file);  // outlives `prepared`, which refers to it
      PreparedReference prepared(task, options, workers);
      ReferenceCheck result = prepared.check();
      if (options.backend == "auto" && !why.empty()) result.notes.push_back(why);
      report = to_json(result);
      summary = render_reference_check(result);
      ++ran;
    } catch (const std::exception& e) {
      report = failed_check_json(check.task_file, e.what());
      summary = std::string("error: ") + e.what() + "\n";
    }
    // What the task left on the workers goes before the next task loads.
    for (const std::string& problem : workers.release_tasks()) {
      say(progress + ": note: " + problem + " (the worker is restarted at the next check)");
    }
    report["wall_s"] = seconds_since(start);
    report["batch"] = position;
    write_file_atomically(check.report_path, report.dump(2) + "\n");
    say(progress + ": " + summary);
  }
  return ran;
}

}  // namespace kforge::cli

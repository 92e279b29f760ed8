#include "cli/suite_problems.h"

#include <chrono>
#include <cstdlib>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/hash.h"
#include "core/task.h"
#include "report/run_directory.h"
#include "task/task_loader.h"
#include "task/torch_task.h"
#include "task/torch_task_batch.h"

namespace kforge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// True when `toml` is a derived task of `problem` made from the bytes whose hash is `sha256`.
bool derived_from_these_bytes(const fs::path& toml, const fs::path& problem,
                              const std::string& sha256) {
  if (!fs::exists(toml)) return false;
  try {
    const Task task = load_task(toml.string());
    return task.has_torch_reference() && task.reference_paths.at("torch") == problem.string() &&
           task.torch_reference.value("problem_sha256", "") == sha256;
  } catch (const std::exception&) {
    return false;  // unreadable or not a derived task: derived again and replaced
  }
}

// Why the TOML at `toml` does not read back into `task`, or "" when it does: the child must run
// the task that was derived, and a field the TOML form cannot carry would change it.
std::string round_trip_difference(const Task& task, const fs::path& toml) {
  try {
    const Task loaded = load_task(toml.string());
    if (json(loaded.signature) != json(task.signature)) return "the signature differs";
    if (json(loaded.workloads) != json(task.workloads)) return "the workloads differ";
    if (json(loaded.tolerance) != json(task.tolerance)) return "the tolerance differs";
    if (loaded.torch_reference.value("torch", json()) != task.torch_reference.value("torch", json())) {
      return "the module mapping differs";
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Writes the derived task of `problem` as TOML at `toml` and sets where the child's task is:
// the TOML, or the problem file itself (derived again by the child, as before the suite derived
// up front) when the TOML does not read back into the same task. The error message when the
// derived JSON is not a task.
std::string write_derived(const DerivedProblem& problem, const fs::path& toml,
                          SuiteProblem& settled, const std::function<void(const std::string&)>& say) {
  try {
    const Task task = task_from_derived(*problem.derived, problem.path);
    fs::create_directories(toml.parent_path());
    // An absolute problem path: the run directory keeps a copy of this file elsewhere.
    write_file_atomically(toml, torch_task_toml(task, ""));
    settled.toml_path = toml;
    if (const std::string why = round_trip_difference(task, toml); !why.empty()) {
      fs::remove(toml);  // never reused by a continued suite either
      settled.toml_path = problem.path;
      say(toml.string() + " does not read back into the derived task (" + why +
          "); its child derives " + problem.path + " itself");
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// "softmax, 1.2 s" / "no built-in family, 0.4 s": what a progress line says of a derived task.
std::string described(const json& derived, double seconds) {
  const std::string family = derived.value("family", "");
  return fmt::format("{}, {:.1f} s", family.empty() ? "no built-in family" : family, seconds);
}

json record_of(const std::string& label, const fs::path& problem, const SuiteProblem& settled) {
  const char* outcome = !settled.error.empty() ? "error" : settled.reused ? "reused" : "derived";
  json entry = {{"label", label},       {"problem", problem.string()}, {"outcome", outcome},
                {"seconds", settled.derive_s}, {"task", settled.toml_path.string()}};
  if (!settled.error.empty()) entry["error"] = settled.error;
  return entry;
}

}  // namespace

fs::path derived_task_path(const fs::path& suite_dir, const std::string& label) {
  return suite_dir / "derived" / (label + ".toml");
}

bool is_suite_problem(const SuiteTask& task) { return is_torch_problem(task.task_path.string()); }

std::map<std::string, SuiteProblem> prepare_suite_problems(
    const std::vector<SuiteTask>& tasks, const fs::path& suite_dir,
    const std::function<bool(const SuiteTask&)>& needed, const SuiteProblemOptions& options) {
  auto say = [&](const std::string& line) {
    if (options.say) options.say(line);
  };
  std::map<std::string, SuiteProblem> settled;
  std::vector<const SuiteTask*> to_derive;
  for (const SuiteTask& task : tasks) {
    if (!is_suite_problem(task) || !needed(task)) continue;
    SuiteProblem& problem = settled[task.label];
    const fs::path toml = derived_task_path(suite_dir, task.label);
    try {
      if (derived_from_these_bytes(toml, task.task_path, sha256_hex(read_file(task.task_path)))) {
        problem.toml_path = toml;
        problem.reused = true;
        continue;
      }
    } catch (const std::exception& e) {
      problem.error = e.what();  // the problem file cannot be read
      continue;
    }
    to_derive.push_back(&task);
  }
  const size_t reused = settled.size() - to_derive.size();
  if (reused > 0) say(fmt::format("{} derived task(s) of an earlier run reused (problem files "
                                  "unchanged)", reused));
  double batch_s = 0.0;
  if (!to_derive.empty()) {
    say(fmt::format("deriving {} PyTorch problem(s) in one Python process", to_derive.size()));
    std::vector<std::string> paths;
    for (const SuiteTask* task : to_derive) paths.push_back(task->task_path.string());
    BatchDeriveOptions batch;
    batch.python = options.python;
    batch.per_problem_timeout_s = options.per_problem_timeout_s;
    batch.should_stop = options.should_stop;
    size_t answered = 0;
    batch.on_result = [&](size_t index, const DerivedProblem& result) {
      const SuiteTask& task = *to_derive[index];
      SuiteProblem& problem = settled[task.label];
      problem.derive_s = result.seconds;
      const fs::path toml = derived_task_path(suite_dir, task.label);
      problem.error = result.derived ? write_derived(result, toml, problem, say) : result.error;
      answered = index + 1;
      say(fmt::format("derived [{}/{}] {}: {}", index + 1, to_derive.size(), task.label,
                      problem.error.empty() ? described(*result.derived, result.seconds)
                                            : "error: " + problem.error));
    };
    const auto start = std::chrono::steady_clock::now();
    try {
      derive_torch_tasks(paths, batch);
    } catch (const Error& e) {
      for (size_t i = answered; i < to_derive.size(); ++i) settled[to_derive[i]->label].error = e.what();
      say(std::string("deriving stopped: ") + e.what());
    }
    batch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  json records = json::array();
  for (const SuiteTask& task : tasks) {
    if (auto found = settled.find(task.label); found != settled.end()) {
      records.push_back(record_of(task.label, task.task_path, found->second));
    }
  }
  if (!records.empty()) {
    fs::create_directories(suite_dir / "derived");
    write_file_atomically(suite_dir / "derived" / "derivation.json",
                          json({{"updated", report::utc_now_iso8601()},
                                {"batch_wall_s", batch_s},
                                {"problems", records}})
                                  .dump(2) + "\n");
  }
  return settled;
}

std::string forwarded_value(const std::vector<std::string>& args, const std::string& name,
                            const char* env, std::string fallback) {
  std::string value = std::move(fallback);
  if (const char* set = env ? std::getenv(env) : nullptr; set != nullptr && *set != '\0') {
    value = set;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) value = args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) value = args[i].substr(name.size() + 1);
  }
  return value;
}

std::string suite_generator(const std::vector<std::string>& args) {
  return forwarded_value(args, "--generator", "KFORGE_GENERATOR", "templates");
}

std::vector<std::string> reference_check_args(const std::vector<std::string>& args) {
  std::vector<std::string> check = {
      "--backend", forwarded_value(args, "--backend", "KFORGE_BACKEND", "auto"),
      "--baseline", forwarded_value(args, "--baseline", "KFORGE_BASELINE", "eager")};
  // The reference of a run goes to its first device (--devices 2,3: device 2).
  std::string device = forwarded_value(args, "--devices", "KFORGE_DEVICES", "");
  device = device.substr(0, device.find(','));
  device = forwarded_value(args, "--device", "KFORGE_DEVICE", device);
  if (!device.empty()) {
    check.push_back("--device");
    check.push_back(device);
  }
  return check;
}

std::optional<std::pair<std::string, std::string>> unserved_reason(const fs::path& toml) {
  if (is_torch_problem(toml.string())) return std::nullopt;  // the child derives it itself
  Task task;
  try {
    task = load_task(toml.string());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!task.has_torch_reference() || !task.family.empty()) return std::nullopt;
  std::string names, reasons;
  for (const auto& [family, why] : family_misses(task)) {
    names += (names.empty() ? "" : ", ") + family;
    reasons += "  " + family + ": " + why + "\n";
  }
  const std::string& problem = task.reference_paths.at("torch");
  return std::make_pair(
      problem + ": no built-in kernel family computes what this module computes" +
          (names.empty() ? "" : " (families tried: " + names + ")") +
          "; --generator llm writes a kernel for it",
      reasons);
}

}  // namespace kforge::cli

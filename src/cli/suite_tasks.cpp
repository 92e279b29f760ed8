#include "cli/suite_tasks.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <map>
#include <set>

#include "common/error.h"

namespace kforge::cli {
namespace fs = std::filesystem;
namespace {

fs::path absolute_normal(const fs::path& path) { return fs::absolute(path).lexically_normal(); }

// A folder's own name, also for "." and paths ending in '/'.
std::string folder_name(const fs::path& folder) {
  fs::path normal = absolute_normal(folder);
  if (!normal.has_filename()) normal = normal.parent_path();
  std::string name = normal.filename().string();
  return name.empty() ? "task" : name;
}

// A Python file in KernelBench's problem format: it defines a Model and get_inputs. Other
// Python files below a suite's folder (helpers, solutions, __init__.py) are not tasks.
bool is_problem_file(const fs::path& path) {
  if (path.extension() != ".py") return false;
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  const std::string source = text.str();
  return source.find("class Model") != std::string::npos &&
         source.find("def get_inputs") != std::string::npos;
}

std::string label_under(const fs::path& root, const fs::path& task_path) {
  if (task_path.extension() == ".py") {
    fs::path relative = task_path.lexically_relative(absolute_normal(root)).replace_extension();
    std::string label = relative.generic_string();
    std::replace(label.begin(), label.end(), '/', '-');
    return label;
  }
  fs::path relative = task_path.parent_path().lexically_relative(absolute_normal(root));
  if (relative.empty() || relative == ".") return folder_name(root);
  std::string label = relative.generic_string();
  std::replace(label.begin(), label.end(), '/', '-');
  return label;
}

std::string label_of_file(const fs::path& task_path) {
  if (task_path.filename() == "task.toml") return folder_name(task_path.parent_path());
  return task_path.stem().string();
}

std::vector<fs::path> task_files_below(const fs::path& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw Error(folder.string() + ": cannot list: " + ec.message());
  for (const fs::directory_entry& entry : it) {
    if (entry.is_directory()) continue;
    if (is_problem_file(entry.path())) {
      found.push_back(absolute_normal(entry.path()));
      continue;
    }
    if (entry.path().filename() != "task.toml") continue;
    // A run directory holds a copy of its task next to run.json: not a task of the suite.
    if (fs::exists(entry.path().parent_path() / "run.json")) continue;
    found.push_back(absolute_normal(entry.path()));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<SuiteTask> discover_suite_tasks(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw Error("suite: no task folder or task file given");
  std::vector<SuiteTask> tasks;
  std::set<fs::path> seen;
  for (const std::string& input : inputs) {
    fs::path path(input);
    std::error_code ec;
    fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status)) {
      throw Error(input + ": no such file or folder (expected a folder of tasks or a task file)");
    }
    std::vector<std::pair<std::string, fs::path>> found;
    if (fs::is_directory(status)) {
      for (const fs::path& file : task_files_below(path)) {
        found.emplace_back(label_under(path, file), file);
      }
      if (found.empty()) {
        throw Error(input + ": no task.toml or PyTorch problem file below this folder (expected " +
                    input + "/<task>/task.toml, one folder per task, or .py files that define "
                    "class Model and get_inputs)");
      }
    } else if (fs::is_regular_file(status)) {
      fs::path file = absolute_normal(path);
      found.emplace_back(label_of_file(file), file);
    } else {
      throw Error(input + ": neither a folder nor a task file");
    }
    for (auto& [label, file] : found) {
      if (seen.insert(file).second) tasks.push_back({label, file});
    }
  }
  // Labels name run directories: make repeats unique, in order ("x", "x-2", "x-3").
  std::map<std::string, int> uses;
  std::set<std::string> taken;
  for (const SuiteTask& task : tasks) taken.insert(task.label);
  std::set<std::string> given;
  for (SuiteTask& task : tasks) {
    if (given.insert(task.label).second) continue;
    std::string base = task.label;
    int& n = uses[base];
    std::string unique;
    do {
      unique = base + "-" + std::to_string(++n + 1);
    } while (taken.count(unique) || given.count(unique));
    task.label = unique;
    given.insert(unique);
  }
  return tasks;
}

}  // namespace kforge::cli

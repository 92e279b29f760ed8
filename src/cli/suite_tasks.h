// Which tasks a `kforge suite` runs and under which names: the task files found in the folders
// and files the user gave, each with a label that names its run directory in the suite.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kforge::cli {

/// One task of a suite.
struct SuiteTask {
  /// Unique within the suite; a plain folder name (no '/'): the task's folder relative to the
  /// folder it was found under, with '/' turned into '-' (examples/rmsnorm/task.toml under
  /// examples -> "rmsnorm"); "-2", "-3", ... is appended to repeats.
  std::string label;
  std::filesystem::path task_path;  // absolute, lexically normal
};

/// The tasks of `inputs`, in order: a folder gives every file named task.toml below it and
/// every PyTorch problem file (a .py that defines `class Model` and `get_inputs`; label: its
/// path below the folder without .py, '/' as '-') (at any depth, sorted by path), skipping run directories (a folder that also holds run.json: a copy
/// that `kforge optimize` made, as in a suite directory inside the folder); a file is taken
/// as it is, whatever its name. A task found twice is kept once.
/// Throws Error naming the input when it does not exist, is neither a file nor a folder, or is
/// a folder with no task.toml or problem file below it.
std::vector<SuiteTask> discover_suite_tasks(const std::vector<std::string>& inputs);

}  // namespace kforge::cli

// A task with everything it needs in one folder: the reproducibility bundle a run carries
// (RUN_DIR/bundle/), so that `kforge verify RUN_DIR` can re-check the run's claim on another
// machine, where the task's reference files are not where they were.
#pragma once

#include <filesystem>
#include <string>

#include "core/task.h"

namespace kforge {

/// Writes `task` into folder `dir` (created; files in it replaced): a copy of every reference
/// file (native sources, or the PyTorch problem file) under its own name, and task.toml naming
/// those copies by relative path; everything else of the task as it was (a TOML task's own text
/// with its [reference] table rewritten, a PyTorch problem's derived task as `kforge task -o`
/// writes it). The folder loads back with load_task(dir / "task.toml") wherever it is moved.
/// A reference that includes files of its own folder is copied alone (its build then fails
/// with the missing include named). Returns dir / "task.toml". Throws Error naming the file
/// that cannot be read or written.
std::filesystem::path write_task_bundle(const Task& task, const std::filesystem::path& dir);

}  // namespace kforge

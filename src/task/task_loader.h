// Reads a task from its TOML file (format: examples/rmsnorm/task.toml).
#pragma once

#include <string>

#include "core/task.h"

namespace kforge {

/// Parses and validates the task at `path`. Reference paths are resolved relative to the task
/// file. Throws Error whose message names the file, the field and what was expected, e.g.
/// "examples/x/task.toml: inputs[1].dtype: expected one of f32, f64, ... got 'float'".
/// Validation: required fields present with the right types; names unique; every symbolic
/// dimension bound by every workload to a positive integer; at least one input, one output and
/// one workload; at least one workload timed (if none is marked, the largest is); tolerance
/// non-negative; reference files exist.
Task load_task(const std::string& path);

/// A short stable hash of the task file's bytes (hex), for provenance and caching.
std::string task_hash(const Task& task);

}  // namespace kforge

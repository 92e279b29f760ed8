// `kforge optimize --resume RUN_DIR`: reading back how a run was started, and refusing what
// cannot be resumed before anything is written.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/optimize_command.h"

namespace kforge::cli {

/// The command's options that decide a run, as recorded in the run database's meta "command"
/// (paths absolute, the backend resolved). Presentation flags (--json, --explain) are left out.
nlohmann::json command_to_json(const OptimizeCommandOptions& options);
/// The inverse; throws Error naming `source` and the field when one is missing or mistyped.
OptimizeCommandOptions command_from_json(const nlohmann::json& json, const std::string& source);

/// What --resume found.
struct ResumePlan {
  /// The run finished: nothing to resume; `result` is its result.json.
  bool complete = false;
  nlohmann::json result;
  /// Otherwise: the recorded options with `given`'s presentation flags and budget limits, and
  /// search.resume set.
  OptimizeCommandOptions options;
};

/// Checks `given.resume_dir` and reads it back. Throws Error, writing nothing, when it is not a
/// directory, holds no run.sqlite, has an incompatible schema or resume format, when
/// `given.task_path` is set and is another task than the one recorded (its hash differs), or when
/// an option in `given.given_flags` other than a budget limit, --json and --explain has a value
/// other than the recorded one (all such options are named; a run directory other than the
/// resumed one counts too).
ResumePlan plan_resume(const OptimizeCommandOptions& given);

}  // namespace kforge::cli

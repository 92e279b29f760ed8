// The `[policy]` table of a task file, read into the task's SourcePolicy (core/policy_settings.h).
#pragma once

#include <string>

#include <toml++/toml.h>

#include "core/policy_settings.h"

namespace kforge {

/// Reads the optional `[policy]` table of a task file (`table` may be null: defaults):
///   allow = ["library_compute", ...]   switches those categories off
///   forbid = ["regex", ...]            adds task patterns (each must compile, repeat only a
///                                      bounded number of times, and not match the empty string)
///   max_source_bytes = N               a positive integer
/// Throws Error "<where>: policy.<field>: <what was expected>" on a wrong type, an unknown
/// category, a bad pattern or an unknown key.
SourcePolicy parse_source_policy(const toml::table* table, const std::string& where);

}  // namespace kforge

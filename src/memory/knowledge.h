// The seed knowledge file (knowledge/seed.toml): the initial HTG that a fresh memory database is
// filled with. Format (TOML, `version = 1`):
//
//   version = 1
//   [[directions]]              id, title, goal, triggers[], risks[], backends[], prior
//   [[directions.strategies]]   id, title, edit_pattern, validation[], triggers[],
//                               edits = [{ param, op, value }], backends[] (optional, a subset of
//                               the direction's; defaults to all of them)
//   [[strategies]]              as [[directions.strategies]] plus `direction` (the id of a
//                               direction defined in the file): adds strategies to a direction
//                               from elsewhere in the file, e.g. a section appended later
//   [[edges]]                   from, to, rationale, risks, prior
//
// Ids are lowercase [a-z0-9_]; direction ids and strategy ids are unique across the whole file;
// a strategy or edge naming a direction the file does not define is an error. Edit ops: set
// (value), increase, decrease, max, min (param, no value) and variant (value = decomposition or
// variant name, no param). Priors are finite utilities in [-1, 1] on the scale of a natural-log
// speedup. Unknown fields are errors so that a typo never silently drops knowledge.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "memory/htg.h"

namespace kforge::memory {

/// The knowledge file format version this build reads.
inline constexpr int kKnowledgeFormatVersion = 1;

/// The parsed content of a knowledge file. Statistics are all zero (a file holds priors only).
struct Knowledge {
  int version = 0;
  std::vector<Direction> directions;  // file order
  std::vector<Strategy> strategies;   // file order; direction_id and backends always set
  std::vector<Edge> edges;            // file order
};

/// Reads and validates a knowledge file.
/// Throws kforge::Error when the file cannot be read, is not valid TOML, or any field is missing,
/// of the wrong type or out of range; the message names the file, line, entry, field and what
/// was expected, e.g. "seed.toml:14: direction 'fusion': field 'prior': expected a number".
Knowledge load_knowledge(const std::filesystem::path& path);

/// Parses knowledge from TOML text; `source_name` names the origin in error messages.
/// Throws kforge::Error exactly as load_knowledge does.
Knowledge parse_knowledge(std::string_view text, const std::string& source_name);

/// Where the seed knowledge is looked up when the caller names none: $KFORGE_SEED_KNOWLEDGE if
/// set, else <source dir>/knowledge/seed.toml when built with KFORGE_SOURCE_DIR, else
/// "knowledge/seed.toml" relative to the working directory. Does not check that the file exists.
std::filesystem::path default_seed_knowledge_path();

}  // namespace kforge::memory

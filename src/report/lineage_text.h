// The best candidate's lineage (result.json's best.lineage, written by search/lineage.h) in
// words, for the console summary, report.md and report.html.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kforge::report {

/// One line per candidate of `lineage` (root first): "#0 simd[...] expert hint, 1.00x quick"
/// for the root, "-> #4 parallelism / parallel_rows, 2.00x full: memory (3 prior transitions,
/// 2 strategy rows from 1 earlier task; p 0.41)" for each move; then one line counting the
/// moves chosen from earlier runs' evidence. Empty when `lineage` is not a non-empty array.
std::vector<std::string> lineage_lines(const nlohmann::json& lineage);

/// Why one move was chosen, from its "support" object (memory/support.h): "memory (...)",
/// "this run's evidence (...)", "explored (...)", "no memory read (policy ...)", or "reason not
/// recorded" for null.
std::string support_text(const nlohmann::json& support);

}  // namespace kforge::report

// The path a search took through the memory, as a small graph for report.html: the directions
// its candidates were made under are nodes, and each candidate is an arrow from its parent's
// direction ("start" for the first candidates: the families' expert hints) to its own, labelled
// with its step and strategy, green when it was correct and red when it was not; an arrow taken
// more than once is drawn wider. Graphviz (`dot`, in scripts/setup) lays it out as SVG.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kforge::report {

/// The DOT text of the path of result.json's "candidates" (fields id, parent, direction,
/// strategy, step, verdict). Candidates without a direction (expert hints) are the node of
/// their own decomposition, "hint: <variant>".
std::string search_path_dot(const nlohmann::json& candidates);

/// `dot` laid out by graphviz as an SVG element (its XML prologue dropped), to inline in a page.
/// Returns "" and sets `why` when graphviz's dot is not installed or fails.
std::string render_dot_svg(const std::string& dot, std::string& why);

}  // namespace kforge::report

#include "memory/graph_dot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace kforge::memory {
namespace {

// DOT string literal: backslashes and quotes escaped.
std::string quoted(const std::string& text) {
  std::string result = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') result += '\\';
    result += c;
  }
  return result + "\"";
}

}  // namespace

double drawn_utility(const Edge& edge) {
  const Stats& lag1 = edge.by_lag[0];
  return lag1.attempts > 0 ? lag1.mean_log_gain : edge.prior;
}

std::string render_dot(const std::vector<Direction>& directions, const std::vector<Edge>& edges,
                       const std::string& title) {
  std::string dot = "digraph htg {\n  label=" + quoted(title) +
                    ";\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=Helvetica];\n"
                    "  edge [fontname=Helvetica, fontsize=9];\n";
  std::set<std::string> ids;
  for (const Direction& d : directions) {
    ids.insert(d.id);
    std::string label = fmt::format("{}\\n{}\\nprior {:.2f}  n {}  mean {:+.3f}", d.title, d.id,
                                    d.prior, d.stats.attempts, d.stats.mean_log_gain);
    dot += "  " + quoted(d.id) + " [label=\"" + label + "\"];\n";
  }
  for (const Edge& e : edges) {
    if (!ids.count(e.from_direction) || !ids.count(e.to_direction)) continue;
    const double utility = drawn_utility(e);
    const double width = std::clamp(1.0 + 20.0 * std::abs(utility), 1.0, 8.0);
    dot += fmt::format("  {} -> {} [penwidth={:.2f}, label=\"u={:+.3f} n={}\"{}];\n",
                       quoted(e.from_direction), quoted(e.to_direction), width, utility,
                       e.by_lag[0].attempts, utility < 0 ? ", style=dashed, color=red" : "");
  }
  return dot + "}\n";
}

}  // namespace kforge::memory

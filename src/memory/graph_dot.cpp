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

// A highlighted thing's colour (a blue no verdict or utility uses).
constexpr const char* kUsedColor = "\"#1f77b4\"";

// The label text of a highlight line, escaped for a DOT label (its own "\n" line breaks kept).
std::string label_line(const std::string& text) {
  std::string escaped = quoted(text);
  return escaped.substr(1, escaped.size() - 2);
}

}  // namespace

double drawn_utility(const Edge& edge) {
  const Stats& lag1 = edge.by_lag[0];
  return lag1.attempts > 0 ? lag1.mean_log_gain : edge.prior;
}

std::string render_dot(const std::vector<Direction>& directions, const std::vector<Edge>& edges,
                       const std::string& title, const DotHighlight& highlight) {
  std::string dot = "digraph htg {\n  label=" + quoted(title) +
                    ";\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=Helvetica];\n"
                    "  edge [fontname=Helvetica, fontsize=9];\n";
  std::set<std::string> ids;
  for (const Direction& d : directions) {
    ids.insert(d.id);
    std::string label =
        fmt::format("{}\\n{}\\nprior {:.2f}  n {}  mean {:+.3f}", label_line(d.title),
                    label_line(d.id), d.prior, d.stats.attempts, d.stats.mean_log_gain);
    std::string style;
    if (const auto chosen = highlight.chosen.find(d.id); chosen != highlight.chosen.end()) {
      if (!chosen->second.empty()) label += "\\n" + label_line(chosen->second);
      style = fmt::format(", penwidth=3, color={}, class=\"chosen\"", kUsedColor);
    }
    dot += "  " + quoted(d.id) + " [label=\"" + label + "\"" + style + "];\n";
  }
  std::set<std::pair<std::string, std::string>> drawn;
  for (const Edge& e : edges) {
    if (!ids.count(e.from_direction) || !ids.count(e.to_direction)) continue;
    const double utility = drawn_utility(e);
    double width = std::clamp(1.0 + 20.0 * std::abs(utility), 1.0, 8.0);
    std::string label = fmt::format("u={:+.3f} n={}", utility, e.by_lag[0].attempts);
    std::string style = utility < 0 ? ", style=dashed, color=red" : "";
    const auto used = highlight.used.find({e.from_direction, e.to_direction});
    if (used != highlight.used.end()) {
      width = std::max(width, 3.0);
      if (!used->second.empty()) label += "\\n" + label_line(used->second);
      style = fmt::format("{}, color={}, fontcolor={}, class=\"used\"",
                          utility < 0 ? ", style=dashed" : "", kUsedColor, kUsedColor);
    }
    drawn.insert({e.from_direction, e.to_direction});
    dot += fmt::format("  {} -> {} [penwidth={:.2f}, label=\"{}\"{}];\n", quoted(e.from_direction),
                       quoted(e.to_direction), width, label, style);
  }
  // A transition the memory holds no edge for yet (the graph was read before the run wrote it).
  for (const auto& [ends, text] : highlight.used) {
    if (drawn.count(ends) || !ids.count(ends.first) || !ids.count(ends.second)) continue;
    dot += fmt::format(
        "  {} -> {} [penwidth=3.00, label=\"new{}\", color={}, fontcolor={}, "
        "class=\"used\"];\n",
        quoted(ends.first), quoted(ends.second), text.empty() ? "" : "\\n" + label_line(text),
        kUsedColor, kUsedColor);
  }
  return dot + "}\n";
}

}  // namespace kforge::memory

#include "report/search_path.h"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/files.h"
#include "common/scratch_dir.h"
#include "process/subprocess.h"

namespace kforge::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string dot_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The node of a candidate: its direction, or for an expert hint its decomposition ("row_serial"
// of "row_serial[A=1]").
std::string node_of(const json& candidate) {
  const std::string direction = field(candidate, "direction");
  if (!direction.empty()) return direction;
  const std::string id = field(candidate, "id");
  return "hint: " + id.substr(0, id.find('['));
}

}  // namespace

std::string search_path_dot(const json& candidates) {
  std::map<std::string, std::string> node_by_id;
  for (const json& c : candidates) node_by_id[field(c, "id")] = node_of(c);
  std::string dot =
      "digraph path {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=Helvetica, "
      "fontsize=10];\n  edge [fontname=Helvetica, fontsize=8];\n  \"start\" [shape=circle];\n";
  std::set<std::string> nodes;
  for (const auto& [id, node] : node_by_id) {
    if (nodes.insert(node).second) dot += "  " + dot_quoted(node) + ";\n";
  }
  // One arrow per (from, to) pair: the steps and strategies that took it, wider when taken often.
  struct Arrow {
    int uses = 0;
    int correct = 0;
    std::vector<std::string> labels;
  };
  std::map<std::pair<std::string, std::string>, Arrow> arrows;
  for (const json& c : candidates) {
    const auto parent = node_by_id.find(field(c, "parent"));
    const std::string from = parent == node_by_id.end() ? "start" : parent->second;
    Arrow& arrow = arrows[{from, node_of(c)}];
    ++arrow.uses;
    arrow.correct += field(c, "verdict") == "ok" ? 1 : 0;
    const std::string strategy = field(c, "strategy");
    const int step = c.contains("step") && c.at("step").is_number() ? c.at("step").get<int>() : 0;
    arrow.labels.push_back(fmt::format("s{}{}", step, strategy.empty() ? "" : " " + strategy));
  }
  for (const auto& [ends, arrow] : arrows) {
    std::string label;
    for (size_t i = 0; i < arrow.labels.size() && i < 3; ++i) {
      label += (i ? "\\n" : "") + arrow.labels[i];
    }
    if (arrow.labels.size() > 3) label += fmt::format("\\n(+{} more)", arrow.labels.size() - 3);
    dot += fmt::format("  {} -> {} [penwidth={:.1f}, color={}, label={}];\n", dot_quoted(ends.first),
                       dot_quoted(ends.second), std::min(1.0 + arrow.uses, 6.0),
                       arrow.correct > 0 ? "\"#2ca02c\"" : "\"#d62728\"", dot_quoted(label));
  }
  return dot + "}\n";
}

std::string render_dot_svg(const std::string& dot, std::string& why) {
  try {
    ScratchDir scratch("kforge-dot");
    const fs::path in = fs::path(scratch.path()) / "path.dot";
    const fs::path out = fs::path(scratch.path()) / "path.svg";
    write_file_atomically(in, dot);
    process::CommandResult result =
        process::run_command({"dot", "-Tsvg", "-o", out.string(), in.string()}, 30);
    if (!result.succeeded() || !fs::exists(out)) {
      why = "graphviz's dot failed: " + result.output;
      return "";
    }
    std::string svg = read_file(out);
    const size_t start = svg.find("<svg");
    return start == std::string::npos ? std::string() : svg.substr(start);
  } catch (const std::exception& e) {
    why = std::string("graphviz's dot is not available (apt-get install graphviz): ") + e.what();
    return "";
  }
}

}  // namespace kforge::report

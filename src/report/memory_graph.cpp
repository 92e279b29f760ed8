#include "report/memory_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "common/files.h"
#include "memory/graph_dot.h"
#include "report/search_path.h"
#include "report/svg_chart.h"

namespace kforge::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double number_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The graph's directions and edges as the memory's types (only what the drawing reads).
std::vector<memory::Direction> directions_of(const json& graph) {
  std::vector<memory::Direction> out;
  for (const json& d : graph.value("directions", json::array())) {
    memory::Direction direction;
    direction.id = text_of(d, "id");
    direction.title = text_of(d, "title");
    direction.prior = number_of(d, "prior");
    direction.stats.attempts = static_cast<int64_t>(number_of(d, "attempts"));
    direction.stats.mean_log_gain = number_of(d, "mean_log_gain");
    if (!direction.id.empty()) out.push_back(direction);
  }
  return out;
}

std::vector<memory::Edge> edges_of(const json& graph) {
  std::vector<memory::Edge> out;
  for (const json& e : graph.value("edges", json::array())) {
    memory::Edge edge;
    edge.from_direction = text_of(e, "from");
    edge.to_direction = text_of(e, "to");
    edge.prior = number_of(e, "prior");
    edge.by_lag[0].attempts = static_cast<int64_t>(number_of(e, "attempts"));
    edge.by_lag[0].mean_log_gain = number_of(e, "mean_log_gain");
    out.push_back(edge);
  }
  return out;
}

// "a, b, c (+2 more)": at most three of `items`, so that a label stays small.
std::string first_few(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size() && i < 3; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > 3) text += fmt::format(" (+{} more)", items.size() - 3);
  return text;
}

std::optional<json> read_graph(const fs::path& path) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    json graph = json::parse(read_file(path));
    if (graph.is_object()) return graph;
  } catch (const std::exception&) {
    // Damaged: the section says the graph is missing.
  }
  return std::nullopt;
}

// The section's heading, as run_html.cpp's others are: escaped text.
std::string heading() {
  return "<h2>" + svg::escape("The memory's graph (HTG) and this run's moves through it") +
         "</h2>\n";
}

std::string note(const std::string& text) {
  return "<p class=\"note\">" + svg::escape(text) + "</p>\n";
}

}  // namespace

json memory_graph_json(const std::vector<memory::Direction>& directions,
                       const std::vector<memory::Edge>& edges, const std::string& backend) {
  json out = {{"backend", backend}, {"directions", json::array()}, {"edges", json::array()}};
  std::set<std::string> ids;
  for (const memory::Direction& d : directions) {
    if (!d.backends.empty() &&
        std::find(d.backends.begin(), d.backends.end(), backend) == d.backends.end()) {
      continue;
    }
    ids.insert(d.id);
    out["directions"].push_back({{"id", d.id},
                                 {"title", d.title},
                                 {"prior", d.prior},
                                 {"attempts", d.stats.attempts},
                                 {"mean_log_gain", d.stats.mean_log_gain}});
  }
  for (const memory::Edge& e : edges) {
    if (!ids.count(e.from_direction) || !ids.count(e.to_direction)) continue;
    out["edges"].push_back({{"from", e.from_direction},
                            {"to", e.to_direction},
                            {"prior", e.prior},
                            {"attempts", e.by_lag[0].attempts},
                            {"mean_log_gain", e.by_lag[0].mean_log_gain}});
  }
  return out;
}

RunTransitions run_transitions(const std::vector<json>& events) {
  std::map<int, const json*> last_of_step;
  for (const json& e : events) {
    if (text_of(e, "event") != "step" || !e.contains("moves") || !e.at("moves").is_array())
      continue;
    last_of_step[static_cast<int>(number_of(e, "step"))] = &e;
  }
  RunTransitions run;
  for (const auto& [step, event] : last_of_step) {
    run.recorded = true;
    const std::string after = text_of(*event, "after");
    for (const json& m : event->at("moves")) {
      RunMove move{step, after, text_of(m, "direction"), text_of(m, "strategy")};
      if (move.direction.empty()) continue;
      run.chosen[move.direction].push_back(
          fmt::format("s{}{}", step, move.strategy.empty() ? "" : " " + move.strategy));
      if (!after.empty()) {
        std::vector<std::string>& steps = run.used[{after, move.direction}];
        const std::string label = fmt::format("s{}", step);
        if (steps.empty() || steps.back() != label) steps.push_back(label);
      }
      run.moves.push_back(std::move(move));
    }
  }
  return run;
}

std::string memory_graph_dot(const json& graph, const RunTransitions& run, size_t max_directions,
                             std::string& cut) {
  std::vector<memory::Direction> directions = directions_of(graph);
  const std::vector<memory::Edge> edges = edges_of(graph);
  // The run's own directions are always drawn; one the graph lacks gets a bare node.
  std::set<std::string> own;
  for (const auto& [direction, moves] : run.chosen) own.insert(direction);
  for (const auto& [ends, steps] : run.used) {
    own.insert(ends.first);
    own.insert(ends.second);
  }
  for (const std::string& id : own) {
    const bool known = std::any_of(directions.begin(), directions.end(),
                                   [&](const memory::Direction& d) { return d.id == id; });
    if (known) continue;
    memory::Direction bare;
    bare.id = id;
    bare.title = id;
    directions.push_back(bare);
  }
  cut.clear();
  // A direction no edge reaches and the run did not choose says nothing about the path: named,
  // not drawn (Graphviz would stack them beside the graph).
  std::set<std::string> connected = own;
  for (const memory::Edge& e : edges) {
    connected.insert(e.from_direction);
    connected.insert(e.to_direction);
  }
  std::vector<std::string> isolated;
  for (const memory::Direction& d : directions) {
    if (!connected.count(d.id)) isolated.push_back(d.id);
  }
  std::erase_if(directions, [&](const memory::Direction& d) { return !connected.count(d.id); });
  if (!isolated.empty()) {
    cut = fmt::format(
        "Not drawn: {} direction{} without any transition in the memory, not "
        "chosen by this run ({}).",
        isolated.size(), isolated.size() == 1 ? "" : "s", fmt::join(isolated, ", "));
  }
  const size_t total = directions.size();
  if (total > max_directions) {
    std::set<std::string> keep = own;
    // Neighbours of the run's directions, strongest edge first (ties by name: a stable page).
    std::vector<std::pair<double, std::string>> neighbours;
    for (const memory::Edge& e : edges) {
      const double strength = std::abs(memory::drawn_utility(e));
      if (keep.count(e.from_direction) && !keep.count(e.to_direction)) {
        neighbours.emplace_back(-strength, e.to_direction);
      } else if (keep.count(e.to_direction) && !keep.count(e.from_direction)) {
        neighbours.emplace_back(-strength, e.from_direction);
      }
    }
    std::sort(neighbours.begin(), neighbours.end());
    for (const auto& [strength, id] : neighbours) {
      if (keep.size() >= max_directions) break;
      keep.insert(id);
    }
    if (keep.empty()) {  // no move yet: the most tried directions
      std::vector<memory::Direction> tried = directions;
      std::stable_sort(tried.begin(), tried.end(), [](const auto& a, const auto& b) {
        return a.stats.attempts > b.stats.attempts;
      });
      for (size_t i = 0; i < max_directions; ++i) keep.insert(tried[i].id);
    }
    std::erase_if(directions, [&](const memory::Direction& d) { return !keep.count(d.id); });
    cut = fmt::format("{} of the memory's {} connected directions are drawn: {}. ",
                      directions.size(), total,
                      own.empty() ? "the most tried"
                                  : "those this run chose and their strongest neighbours") +
          cut;
    if (cut.back() == ' ') cut.pop_back();
  }
  memory::DotHighlight highlight;
  for (const auto& [direction, moves] : run.chosen)
    highlight.chosen[direction] = "run: " + first_few(moves);
  for (const auto& [ends, steps] : run.used) highlight.used[ends] = "run: " + first_few(steps);
  return memory::render_dot(
      directions, edges, "memory (" + text_of(graph, "backend") + "), this run in blue", highlight);
}

std::string memory_graph_section(const fs::path& run_dir, const std::vector<json>& events) {
  const std::optional<json> graph = read_graph(run_dir / kMemoryGraphFile);
  const RunTransitions run = run_transitions(events);
  if (!graph && !run.recorded) return "";
  std::string body;
  std::map<std::pair<std::string, std::string>, std::string> in_memory;
  if (!graph) {
    body += note("This run directory has no readable " + std::string(kMemoryGraphFile) +
                 " (a kforge before it kept the memory's graph there): the graph is not drawn; "
                 "the table has the run's moves.");
  } else {
    for (const memory::Edge& e : edges_of(*graph)) {
      in_memory[{e.from_direction, e.to_direction}] =
          fmt::format("{:+.3f} ({})", memory::drawn_utility(e), e.by_lag[0].attempts);
    }
    std::string cut, why;
    const std::string svg =
        render_dot_svg(memory_graph_dot(*graph, run, kMaxGraphDirections, cut), why);
    body += svg.empty() ? note("The graph is not drawn: " + why +
                               ". The table has the run's moves "
                               "and the memory's numbers for each.")
                        : "<div class=\"memory-graph\">" + svg + "</div>\n";
    if (!cut.empty()) body += note(cut);
  }
  if (!run.recorded) {
    body += note(
        "This run's events name no move per step (no step yet, or a kforge before "
        "they did): nothing is highlighted.");
    return heading() + body;
  }
  body += note(
      "Boxes are directions, arrows the transitions the memory holds evidence for "
      "(u: mean log gain at lag 1, or the prior without evidence; n: attempts). Blue: "
      "the directions this run chose and the transitions its moves updated.");
  body +=
      "<table id=\"memory-moves\"><tr><th>step</th><th>after</th><th>direction</th>"
      "<th>strategy</th><th>edge in the memory: u (n)</th></tr>\n";
  for (const RunMove& m : run.moves) {
    std::string edge = "- (first step: no edge)";
    if (!m.after.empty()) {
      const auto it = in_memory.find({m.after, m.direction});
      edge = it != in_memory.end() ? it->second : "not in the memory's graph";
    }
    body += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        m.step, svg::escape(m.after.empty() ? "-" : m.after),
                        svg::escape(m.direction), svg::escape(m.strategy), svg::escape(edge));
  }
  return heading() + body + "</table>\n";
}

}  // namespace kforge::report

// The memory's graph in report.html (issue 22): the HTG of the run's backend, as `kforge memory
// graph` draws it with Graphviz (memory/graph_dot.h), inline as SVG, with the directions the run
// chose and the transitions it made highlighted. Where search_path.h draws the run's own path
// (candidate to candidate), this shows where that path lies in the memory it read and wrote:
// the edges' utilities and evidence counts, and the directions it did not take.
//
// The page is built from the run directory alone (a moved run still shows it), so the run keeps
// the graph there: memory_graph.json, written by `kforge optimize` when the run starts (the
// memory as it found it) and again when it ends (with its own evidence). What the run did comes
// from events.jsonl: each "step" event names its moves' directions and strategies and the
// direction chosen before them ("after"), so (after, direction) is the lag-1 edge each move's
// evidence updated. A memory of many directions is cut to the run's neighbourhood.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "memory/htg.h"

namespace kforge::report {

/// The run directory's file the graph is drawn from.
inline constexpr const char* kMemoryGraphFile = "memory_graph.json";

/// At most this many directions are drawn (a larger memory is cut to the run's neighbourhood).
inline constexpr size_t kMaxGraphDirections = 16;

/// memory_graph.json's content: {"backend", "directions": [{"id", "title", "prior",
/// "attempts", "mean_log_gain"}], "edges": [{"from", "to", "prior", "attempts",
/// "mean_log_gain"}]}, with the directions that apply to `backend` and the edges between them
/// (attempts and mean log gain: the direction's, and the edge's at lag 1).
nlohmann::json memory_graph_json(const std::vector<memory::Direction>& directions,
                                 const std::vector<memory::Edge>& edges,
                                 const std::string& backend);

/// One move of a step: its direction and strategy, after the direction chosen before it ("" at
/// the first step).
struct RunMove {
  int step = 0;
  std::string after;
  std::string direction;
  std::string strategy;
};

/// What a run did on the graph, from its "step" events (the last one of each step, so that a
/// resumed run counts a replayed step once).
struct RunTransitions {
  /// Every move, in step order.
  std::vector<RunMove> moves;
  /// Some step event names its moves (false for a run of a kforge before they did, or one with
  /// no step yet).
  bool recorded = false;
  /// Each direction chosen -> its moves, "s<step> <strategy>", in step order.
  std::map<std::string, std::vector<std::string>> chosen;
  /// Each transition made, (direction chosen before, direction chosen) -> the steps, "s<step>".
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> used;
};

/// The transitions of events.jsonl's parsed lines.
RunTransitions run_transitions(const std::vector<nlohmann::json>& events);

/// The DOT text of `graph` (memory_graph.json) with `run` highlighted. Directions that no edge
/// reaches and the run did not choose are left out; of the rest, all when there are at most
/// `max_directions`, else those the run chose or reached and their strongest neighbours (by
/// |utility| of the edge to them) up to `max_directions` (the run's own are all kept, even past
/// it). `cut` is set to sentences saying what was left out, "" when nothing was.
std::string memory_graph_dot(const nlohmann::json& graph, const RunTransitions& run,
                             size_t max_directions, std::string& cut);

/// report.html's section: the graph of `run_dir`/memory_graph.json as inline SVG with `events`'
/// transitions highlighted, a table of those transitions with the memory's numbers for each
/// (always, so the page is complete without Graphviz), and notes for what is missing (no
/// memory_graph.json, no Graphviz, events without moves). "" when the run has neither a graph
/// nor a recorded move.
std::string memory_graph_section(const std::filesystem::path& run_dir,
                                 const std::vector<nlohmann::json>& events);

}  // namespace kforge::report

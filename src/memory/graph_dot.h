// The HTG as a Graphviz DOT graph (`kforge memory graph`): directions are nodes, transition
// edges are arrows whose width grows with their utility.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "memory/htg.h"

namespace kforge::memory {

/// The utility an arrow is drawn with: the mean log gain of the edge's lag-1 evidence when it
/// has any attempt, else its prior (the same fallback the policy uses at lag 1).
double drawn_utility(const Edge& edge);

/// What one run did on the graph, drawn over it (report.html, report/memory_graph.h).
struct DotHighlight {
  /// The directions the run chose, each with a line added to its label (e.g. the strategies
  /// and steps): drawn with a thick blue outline and SVG class "chosen".
  std::map<std::string, std::string> chosen;
  /// The transitions (from, to) the run made, each with a line added to its label (e.g. the
  /// steps): drawn thick and blue with SVG class "used"; one the memory has no edge for yet is
  /// drawn too, labelled "new".
  std::map<std::pair<std::string, std::string>, std::string> used;
};

/// Renders `directions` and the edges between them (edges touching a direction not in the list
/// are left out) as DOT text. Node labels: title, id, prior, attempts and mean log gain.
/// Arrow width: penwidth = clamp(1 + 20 * |utility|, 1, 8) (a utility of 0.35, about 1.4x,
/// draws at full width); negative utilities are dashed and red; label "u=<utility> n=<lag-1
/// attempts>". `highlight` marks what a run chose and used (blue; penwidth at least 3).
std::string render_dot(const std::vector<Direction>& directions, const std::vector<Edge>& edges,
                       const std::string& title, const DotHighlight& highlight = {});

}  // namespace kforge::memory

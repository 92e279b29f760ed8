// The HTG as a Graphviz DOT graph (`kforge memory graph`): directions are nodes, transition
// edges are arrows whose width grows with their utility.
#pragma once

#include <string>
#include <vector>

#include "memory/htg.h"

namespace kforge::memory {

/// The utility an arrow is drawn with: the mean log gain of the edge's lag-1 evidence when it
/// has any attempt, else its prior (the same fallback the policy uses at lag 1).
double drawn_utility(const Edge& edge);

/// Renders `directions` and the edges between them (edges touching a direction not in the list
/// are left out) as DOT text. Node labels: title, id, prior, attempts and mean log gain.
/// Arrow width: penwidth = clamp(1 + 20 * |utility|, 1, 8) (a utility of 0.35, about 1.4x,
/// draws at full width); negative utilities are dashed and red; label "u=<utility> n=<lag-1
/// attempts>".
std::string render_dot(const std::vector<Direction>& directions, const std::vector<Edge>& edges,
                       const std::string& title);

}  // namespace kforge::memory

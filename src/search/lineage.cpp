#include "search/lineage.h"

#include <algorithm>
#include <map>
#include <set>

namespace kforge::search {

void to_json(nlohmann::json& j, const LineageStep& step) {
  j = {{"index", step.index},
       {"step", step.step},
       {"id", step.id},
       {"parent", step.parent_id},
       {"direction", step.direction_id},
       {"strategy", step.strategy_id},
       {"speedup", step.speedup},
       {"speedup_rung", step.speedup_rung}};
  if (step.support) {
    j["support"] = *step.support;
  } else {
    // A hint has no move; a move recorded without its support is unknown.
    j["support"] = nullptr;
  }
}

std::vector<LineageStep> trace_lineage(std::span<const LineageStep> candidates,
                                       const std::string& best_id) {
  std::map<std::string, const LineageStep*> by_id;
  for (const LineageStep& c : candidates) by_id.emplace(c.id, &c);
  std::vector<LineageStep> chain;
  std::set<std::string> seen;
  for (auto it = by_id.find(best_id); it != by_id.end() && seen.insert(it->first).second;
       it = by_id.find(it->second->parent_id)) {
    chain.push_back(*it->second);
    if (it->second->parent_id.empty()) break;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace kforge::search

#include "memory/weighting.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace kforge::memory {
namespace {

bool similar(const std::string& a, const std::string& b, const ProvenanceWeights& weights) {
  for (const std::vector<std::string>& group : weights.similar_families) {
    bool has_a = std::find(group.begin(), group.end(), a) != group.end();
    bool has_b = std::find(group.begin(), group.end(), b) != group.end();
    if (has_a && has_b) return true;
  }
  return false;
}

}  // namespace

void ProvenanceWeights::validate() const {
  const std::pair<const char*, double> factors[] = {{"other_device", other_device},
                                                    {"other_toolchain", other_toolchain},
                                                    {"similar_family", similar_family},
                                                    {"other_family", other_family}};
  for (const auto& [name, value] : factors) {
    if (!std::isfinite(value) || value < 0.0 || value > 1.0) {
      throw Error(std::string("provenance weights: ") + name +
                  ": expected a number in [0, 1], got " + std::to_string(value));
    }
  }
}

void ProvenanceWeights::validate_families(const std::vector<std::string>& known) const {
  for (const std::vector<std::string>& group : similar_families) {
    for (const std::string& family : group) {
      if (std::find(known.begin(), known.end(), family) != known.end()) continue;
      std::string names;
      for (const std::string& name : known) names += (names.empty() ? "" : ", ") + name;
      throw Error("similar families: unknown family '" + family + "' (known: " +
                  (names.empty() ? "none" : names) + ")");
    }
  }
}

double evidence_weight(const Provenance& evidence, const Provenance& current,
                       const ProvenanceWeights& weights) {
  if (evidence.backend != current.backend) return 0.0;
  double weight = 1.0;
  if (evidence.device != current.device ||
      evidence.compute_capability != current.compute_capability) {
    weight *= weights.other_device;
  }
  if (evidence.toolchain != current.toolchain) weight *= weights.other_toolchain;
  if (evidence.family != current.family) {
    weight *= similar(evidence.family, current.family, weights) ? weights.similar_family
                                                                : weights.other_family;
  }
  return weight;
}

void WeightedStats::add(const Evidence& evidence, double weight) {
  if (!(weight > 0.0)) return;
  attempts += weight;
  if (evidence.verdict != "ok" || !evidence.log_gain.has_value()) return;
  const double gain = *evidence.log_gain;
  gain_weight += weight;
  mean_log_gain += weight * (gain - mean_log_gain) / gain_weight;
  ema_log_gain += kEmaWeight * weight * (gain - ema_log_gain);
  if (gain > 0.0) successes += weight;
}

MemoryView MemoryView::load(Store& store, const Provenance& context,
                            const ProvenanceWeights& weights) {
  MemoryView view;
  view.directions_ = store.directions(context.backend);
  for (const Direction& direction : view.directions_) {
    for (Strategy& strategy : store.strategies(direction.id)) {
      if (strategy.backends.empty() || std::find(strategy.backends.begin(), strategy.backends.end(),
                                                 context.backend) != strategy.backends.end()) {
        view.strategies_.push_back(std::move(strategy));
      }
    }
  }
  for (Edge& edge : store.edges()) {
    auto key = std::make_pair(edge.from_direction, edge.to_direction);
    view.edges_.emplace(std::move(key), std::move(edge));
  }
  for (Evidence& evidence : store.evidence(context.backend)) {
    const double weight = evidence_weight(evidence.provenance, context, weights);
    view.direction_stats_[evidence.direction_id].add(evidence, weight);
    if (!evidence.strategy_id.empty())
      view.strategy_stats_[evidence.strategy_id].add(evidence, weight);
    const std::size_t lags = std::min<std::size_t>(evidence.prefix.size(), kMaxLag);
    for (std::size_t j = 0; j < lags; ++j) {
      view.edge_stats_[{{evidence.prefix[j], evidence.direction_id}, static_cast<int>(j) + 1}].add(
          evidence, weight);
    }
    view.evidence_.emplace_back(std::move(evidence), weight);
  }
  return view;
}

std::vector<Strategy> MemoryView::strategies(const std::string& direction_id) const {
  std::vector<Strategy> result;
  for (const Strategy& strategy : strategies_) {
    if (strategy.direction_id == direction_id) result.push_back(strategy);
  }
  return result;
}

const Edge* MemoryView::edge(const std::string& from, const std::string& to) const {
  auto it = edges_.find({from, to});
  return it == edges_.end() ? nullptr : &it->second;
}

WeightedStats MemoryView::direction_stats(const std::string& id) const {
  auto it = direction_stats_.find(id);
  return it == direction_stats_.end() ? WeightedStats{} : it->second;
}

WeightedStats MemoryView::strategy_stats(const std::string& id) const {
  auto it = strategy_stats_.find(id);
  return it == strategy_stats_.end() ? WeightedStats{} : it->second;
}

WeightedStats MemoryView::edge_stats(const std::string& from, const std::string& to,
                                     int lag) const {
  auto it = edge_stats_.find({{from, to}, lag});
  return it == edge_stats_.end() ? WeightedStats{} : it->second;
}

}  // namespace kforge::memory

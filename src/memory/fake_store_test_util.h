// An in-memory Store for decision tests: directions and strategies in insertion order, edges by
// (from, to), evidence appended by record() (statistics are derived by MemoryView, so tests
// state evidence, never numbers on nodes).
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory/store.h"

namespace kforge::memory::testing {

inline const Provenance kHere = {"cuda", "NVIDIA H200", "9.0", "nvcc 12.8", "rmsnorm", "t1"};

class FakeStore : public Store {
 public:
  Direction& add_direction(const std::string& id, double prior, int strategy_count = 2,
                           const std::string& backend = "cuda") {
    directions_.push_back({});
    Direction& d = directions_.back();
    d.id = id;
    d.prior = prior;
    d.backends = {backend};
    for (int i = 0; i < strategy_count; ++i) {
      Strategy s;
      s.id = id + "_s" + std::to_string(i);
      s.direction_id = id;
      s.backends = {backend};
      strategies_.push_back(s);
    }
    return d;
  }
  Edge& add_edge(const std::string& from, const std::string& to, double prior) {
    Edge& e = edges_[{from, to}];
    e.from_direction = from;
    e.to_direction = to;
    e.prior = prior;
    return e;
  }
  /// Records one ok attempt (or a failure when gain is nullopt) of `strategy` under `direction`
  /// after `prefix` (most recent first), made in `where`.
  void attempt(const std::string& direction, const std::string& strategy,
               std::optional<double> gain, std::vector<std::string> prefix = {},
               const Provenance& where = kHere) {
    Evidence e;
    e.direction_id = direction;
    e.strategy_id = strategy;
    e.prefix = std::move(prefix);
    e.provenance = where;
    e.verdict = gain ? "ok" : "compile_error";
    e.log_gain = gain;
    record(e);
  }

  std::vector<Direction> directions(const std::string& backend) override {
    std::vector<Direction> result;
    for (const Direction& d : directions_) {
      if (backend.empty() ||
          std::find(d.backends.begin(), d.backends.end(), backend) != d.backends.end()) {
        result.push_back(d);
      }
    }
    return result;
  }
  std::vector<Strategy> strategies(const std::string& direction_id) override {
    std::vector<Strategy> result;
    for (const Strategy& s : strategies_) {
      if (s.direction_id == direction_id) result.push_back(s);
    }
    return result;
  }
  std::optional<Edge> edge(const std::string& from, const std::string& to) override {
    auto it = edges_.find({from, to});
    if (it == edges_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<Edge> edges() override {
    std::vector<Edge> result;
    for (const auto& [key, e] : edges_) result.push_back(e);
    return result;
  }
  std::vector<Evidence> evidence(const std::string& backend) override {
    std::vector<Evidence> result;
    for (const Evidence& e : evidence_) {
      if (backend.empty() || e.provenance.backend == backend) result.push_back(e);
    }
    return result;
  }
  void record(const Evidence& evidence) override { evidence_.push_back(evidence); }
  int64_t evidence_count() override { return static_cast<int64_t>(evidence_.size()); }

  std::vector<Direction> directions_;
  std::vector<Strategy> strategies_;
  std::map<std::pair<std::string, std::string>, Edge> edges_;
  std::vector<Evidence> evidence_;
};

}  // namespace kforge::memory::testing

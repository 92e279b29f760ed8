// Persistent storage of the HTG: a narrow interface (decision code and tests use it) and its
// SQLite implementation (sqlite_store.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/htg.h"
#include "memory/recorded_run.h"

namespace kforge::memory {

class Store {
 public:
  virtual ~Store() = default;
  /// Directions usable on `backend` ("cpu" | "cuda"; "" for all), with their raw statistics.
  virtual std::vector<Direction> directions(const std::string& backend) = 0;
  /// Strategies under one direction, with their raw statistics.
  virtual std::vector<Strategy> strategies(const std::string& direction_id) = 0;
  /// The edge from -> to with its per-lag statistics, or nullopt if the graph has none (never
  /// seen, no prior).
  virtual std::optional<Edge> edge(const std::string& from_direction,
                                   const std::string& to_direction) = 0;
  /// Every edge of the graph, with per-lag statistics.
  virtual std::vector<Edge> edges() = 0;
  /// Evidence rows whose provenance backend is `backend` ("" for all), oldest first.
  virtual std::vector<Evidence> evidence(const std::string& backend) = 0;
  /// Appends the evidence and updates, atomically, the statistics of its direction, its strategy
  /// and, for every j with prefix[j - 1] set (j <= kMaxLag), lag j of the edge
  /// prefix[j - 1] -> direction.
  virtual void record(const Evidence& evidence) = 0;
  /// Number of evidence rows recorded (all tasks, all devices).
  virtual int64_t evidence_count() = 0;
  /// Runs recorded beside the evidence (recorded_run.h: `kforge eval --record`), oldest first;
  /// only those of `task_hash` when it is not "". A store that keeps none answers empty.
  virtual std::vector<RecordedRun> runs(const std::string& task_hash) {
    (void)task_hash;
    return {};
  }
};

}  // namespace kforge::memory

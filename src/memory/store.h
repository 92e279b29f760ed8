// Persistent storage of the HTG: a narrow interface (decision code and tests use it) and its
// SQLite implementation (sqlite_store.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/htg.h"

namespace kforge::memory {

class Store {
 public:
  virtual ~Store() = default;
  /// Directions usable on `backend` ("cpu" | "cuda"), with their statistics.
  virtual std::vector<Direction> directions(const std::string& backend) = 0;
  /// Strategies under one direction, with their statistics.
  virtual std::vector<Strategy> strategies(const std::string& direction_id) = 0;
  /// The edge from -> to, or nullopt if the graph has none (never seen, no prior).
  virtual std::optional<Edge> edge(const std::string& from_direction,
                                   const std::string& to_direction) = 0;
  /// Appends the evidence and updates the statistics of its direction, strategy and (when
  /// previous_direction_id is set) the edge previous -> direction, atomically.
  virtual void record(const Evidence& evidence) = 0;
  /// Number of evidence rows recorded (all tasks, all devices).
  virtual int64_t evidence_count() = 0;
};

}  // namespace kforge::memory

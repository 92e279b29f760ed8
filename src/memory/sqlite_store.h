// The HTG in one SQLite file: directions, strategies, edges and evidence with provenance.
//
// Schema version lives in PRAGMA user_version and is raised only by explicit, numbered
// migrations (sqlite_store.cpp, kMigrations). The database runs in WAL mode with a busy timeout
// so that several kforge processes (a suite running tasks side by side) can share one file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory/knowledge.h"
#include "memory/store.h"

namespace kforge::memory {

namespace sqlite {
class Database;
}

/// The memory database used when the caller names none: $KFORGE_MEMORY_DB if set and non-empty,
/// else $XDG_DATA_HOME/kforge/memory.sqlite, else $HOME/.local/share/kforge/memory.sqlite.
/// Throws Error when none of KFORGE_MEMORY_DB, XDG_DATA_HOME and HOME is set.
std::filesystem::path default_memory_path();

class SqliteStore final : public Store {
 public:
  /// The schema version this build writes (PRAGMA user_version after open()).
  static constexpr int kSchemaVersion = 1;
  /// Weight of the newest observation in ema_log_gain (see the definition in sqlite_store.cpp).
  static constexpr double kEmaWeight = 0.3;

  /// Opens or creates the database at `path` (":memory:" for a private in-memory one), creating
  /// parent directories, migrating the schema to kSchemaVersion, and, when the graph has no
  /// direction yet, loading `seed_knowledge_path` (skipped when that path is empty).
  /// Throws Error when a directory cannot be created, SQLite fails, the database was written by a
  /// newer kforge (user_version > kSchemaVersion), or the seed knowledge is malformed (the graph
  /// then stays empty and the next open() seeds again).
  static std::unique_ptr<SqliteStore> open(const std::filesystem::path& path,
                                           const std::filesystem::path& seed_knowledge_path);
  ~SqliteStore() override;

  /// Directions whose backends include `backend`, in seed order; all of them when `backend` is "".
  std::vector<Direction> directions(const std::string& backend) override;
  /// Strategies under `direction_id`, in seed order; empty for an unknown direction.
  std::vector<Strategy> strategies(const std::string& direction_id) override;
  std::optional<Edge> edge(const std::string& from_direction,
                           const std::string& to_direction) override;
  /// Appends the evidence and updates, in one transaction, the statistics of its direction, its
  /// strategy (when strategy_id is set) and the edge previous -> direction (when
  /// previous_direction_id is set; the edge row is created with prior 0 if absent).
  /// An attempt counts as a success when verdict == "ok" and log_gain > 0; mean_log_gain and
  /// ema_log_gain move only on attempts with verdict "ok" and a log gain.
  /// Throws Error (and writes nothing) for an unknown direction, a strategy that is not under the
  /// direction, an unknown previous direction, a non-finite log gain, or an SQLite failure.
  void record(const Evidence& evidence) override;
  int64_t evidence_count() override;

  /// The schema version stored in the file (PRAGMA user_version).
  int schema_version();
  const std::filesystem::path& path() const { return path_; }

 private:
  SqliteStore(std::filesystem::path path, std::unique_ptr<sqlite::Database> db);
  void migrate();
  void seed(const Knowledge& knowledge);
  void update_stats(const std::string& table, const std::string& key_condition,
                    const std::vector<std::string>& keys, const Evidence& evidence,
                    const std::string& now);

  std::filesystem::path path_;
  std::unique_ptr<sqlite::Database> db_;
};

}  // namespace kforge::memory

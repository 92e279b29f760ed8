// The HTG in one SQLite file: directions, strategies, edges and evidence with provenance.
//
// Schema version lives in PRAGMA user_version and is raised only by explicit, numbered
// migrations (sqlite_schema.h has the history). The database runs in WAL mode with a busy timeout
// and writes each update in one IMMEDIATE transaction, so that several kforge processes (a suite
// running tasks side by side) can share one file; a writer that cannot get the lock within the
// timeout fails with an error naming the file, and nothing already committed is lost.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "memory/knowledge.h"
#include "memory/recorded_run.h"
#include "memory/store.h"

namespace kforge::memory {

namespace sqlite {
class Database;
}

/// The memory database used when the caller names none: $KFORGE_MEMORY if set and non-empty,
/// else $KFORGE_MEMORY_DB (the name before schema 2, still honoured), else
/// $XDG_DATA_HOME/kforge/memory.sqlite, else $HOME/.local/share/kforge/memory.sqlite.
/// Throws Error when none of these is set.
std::filesystem::path default_memory_path();

/// A record() transaction takes milliseconds; 5 s lets a concurrent kforge process finish its
/// write, yet a stuck process surfaces as an error instead of hanging the run.
inline constexpr int kDefaultBusyTimeoutMs = 5000;

class SqliteStore final : public Store {
 public:
  /// The schema version this build writes (PRAGMA user_version after open()).
  static constexpr int kSchemaVersion = 4;

  /// Opens or creates the database at `path` (":memory:" for a private in-memory one), creating
  /// parent directories, migrating the schema to kSchemaVersion, and, when the graph has no
  /// direction yet, loading `seed_knowledge_path` (skipped when that path is empty). A graph
  /// seeded before gains the seed's directions, strategies and edges it lacks (add_missing_seed:
  /// a memory from an older kforge learns the new seed's nodes; what it has is kept);
  /// seed_additions() says what was added.
  /// Throws Error, naming the file, when a directory cannot be created, the file is not a kforge
  /// memory (another program's database, or not SQLite at all: corrupt), it is locked longer than
  /// `busy_timeout_ms`, it was written by a newer kforge (user_version > kSchemaVersion; the file
  /// is left unchanged), or the seed knowledge is malformed (the graph then stays empty and the
  /// next open() seeds again).
  static std::unique_ptr<SqliteStore> open(const std::filesystem::path& path,
                                           const std::filesystem::path& seed_knowledge_path,
                                           int busy_timeout_ms = kDefaultBusyTimeoutMs);
  /// As above, seeding an empty graph from already parsed `seed` (benchmarks, tests).
  static std::unique_ptr<SqliteStore> open(const std::filesystem::path& path,
                                           const Knowledge& seed,
                                           int busy_timeout_ms = kDefaultBusyTimeoutMs);
  ~SqliteStore() override;

  /// Directions whose backends include `backend`, in seed order; all of them when `backend` is "".
  std::vector<Direction> directions(const std::string& backend) override;
  /// Strategies under `direction_id`, in seed order; empty for an unknown direction.
  std::vector<Strategy> strategies(const std::string& direction_id) override;
  std::optional<Edge> edge(const std::string& from_direction,
                           const std::string& to_direction) override;
  std::vector<Edge> edges() override;
  std::vector<Evidence> evidence(const std::string& backend) override;
  /// Appends the evidence and updates, in one transaction, the statistics of its direction, its
  /// strategy (when strategy_id is set) and lag j of the edge prefix[j - 1] -> direction for
  /// j = 1..min(|prefix|, kMaxLag) (edge rows are created with prior 0 if absent). Statistics
  /// follow htg.h, Stats; a success is verdict "ok" with log_gain > 0.
  /// Throws Error (and writes nothing) for an unknown direction, a strategy that is not under the
  /// direction, an unknown direction in the prefix, a non-finite log gain, a locked file or
  /// another SQLite failure.
  void record(const Evidence& evidence) override;
  int64_t evidence_count() override;

  /// Appends `run` (its created_at set now, or kept when `run.created_at` is set, as by import)
  /// and its candidates in one transaction; returns its id. Recorded runs are not evidence:
  /// they change no statistic of the graph. Throws Error naming the file when the run has no
  /// candidate, a number is not finite, or the write fails (locked, read-only).
  int64_t record_run(const RecordedRun& run);
  /// Recorded runs, oldest first; only those of `task_hash` when it is not "".
  std::vector<RecordedRun> runs(const std::string& task_hash) override;
  std::vector<RecordedRun> runs() { return runs(""); }
  /// Throws Error naming the file when this memory cannot be written (a read-only file or
  /// folder, a lock held past the busy timeout), so that a command can refuse before its work
  /// rather than fail to record it after. Writes nothing.
  void check_writable();

  /// Where a memory's rows end: its highest evidence id and run id (0 when it has none). Evidence
  /// and runs are only appended (each new id is the highest + 1; only reset() deletes, and a
  /// suite's job never runs it), so the rows past a mark are exactly those written after it.
  struct Mark {
    int64_t evidence_id = 0;
    int64_t run_id = 0;
  };
  /// The graph and the evidence and recorded runs whose ids are past `after` (all of them
  /// without a mark) as JSON (format "kforge-memory", version 1; sqlite_transfer.cpp). Directions,
  /// strategies and edges are always exported whole (a seed's worth of rows): import adds only
  /// those the importing memory lacks.
  nlohmann::json export_json(const Mark& after);
  nlohmann::json export_json();
  /// What import_json changed.
  struct ImportSummary {
    int directions_added = 0;
    int strategies_added = 0;
    int edges_added = 0;
    int evidence_added = 0;
    int evidence_skipped = 0;  // already present (same created_at, candidate, direction, ...)
    int runs_added = 0;
    int runs_skipped = 0;  // already present (same created_at, kind, task and task hash)
  };
  /// Merges an export into this memory in one transaction (all or nothing):
  ///   - directions, strategies and edges are matched by id (edges by from/to); unknown ones are
  ///     added with their text and priors, known ones keep this memory's text and priors;
  ///   - evidence rows are appended unless an identical row (same created_at, direction,
  ///     strategy, candidate, verdict and task hash) is already here, so importing the same file
  ///     twice changes nothing;
  ///   - recorded runs ("runs", absent from exports before schema 3) are appended unless one
  ///     with the same created_at, kind, task and task hash is already here;
  ///   - statistics are then recomputed from all evidence (they are never imported as numbers).
  /// Throws Error naming `source_name` and the entry when the JSON is not a kforge-memory export,
  /// a field is missing or of the wrong type, or evidence names a direction or strategy that
  /// neither this memory nor the file defines.
  ImportSummary import_json(const nlohmann::json& document, const std::string& source_name);
  /// Writes a consistent copy of this whole database to `target` (SQLite's VACUUM INTO: one
  /// read transaction, so concurrent writers neither block it nor tear it), for a process that
  /// must work on its own file (a Slurm job of a suite; cli/suite_command.h), and stores in the
  /// copy where it ends (its Mark, in table snapshot_mark; sqlite_snapshot.cpp) so that merging
  /// the copy back later can export only the rows written into it after the snapshot. Returns
  /// that mark. Throws Error naming `target` when it already exists or cannot be written.
  Mark write_snapshot(const std::filesystem::path& target);
  /// The mark write_snapshot stored in this file: nullopt when the file is not a snapshot, or a
  /// snapshot written by a kforge from before marks (merge it whole then). Throws Error naming
  /// the file when its snapshot_mark table does not hold exactly one row of two integers.
  std::optional<Mark> snapshot_mark();
  /// Deletes every evidence row, statistic and recorded run, then restores the seed (reset), in
  /// one transaction. `seed` replaces the graph's nodes and edges.
  void reset(const Knowledge& seed);
  /// Adds the directions, strategies and edges of `seed` whose ids (an edge: from and to) this
  /// graph lacks, in one transaction; existing nodes keep their text, priors and evidence.
  /// Evidence counts of the summary stay 0. Throws Error when a seed strategy names a direction
  /// that neither the graph nor the seed has.
  ImportSummary add_missing_seed(const Knowledge& seed);
  /// What open() added from the seed to a graph seeded before (all zero for a new graph).
  const ImportSummary& seed_additions() const { return seed_additions_; }

  /// The schema version stored in the file (PRAGMA user_version).
  int schema_version();
  const std::filesystem::path& path() const { return path_; }

 private:
  SqliteStore(std::filesystem::path path, std::unique_ptr<sqlite::Database> db);
  static std::unique_ptr<SqliteStore> open_database(const std::filesystem::path& path,
                                                    int busy_timeout_ms);
  void seed(const Knowledge& knowledge);
  void insert_direction(const Direction& d);
  void insert_strategy(const Strategy& s);
  void insert_edge(const Edge& e);
  void insert_evidence(const Evidence& e, const std::string& created_at);
  std::vector<Evidence> evidence_after(const std::string& backend, int64_t after_id);
  std::vector<RecordedRun> runs_after(const std::string& task_hash, int64_t after_id);
  int64_t insert_run(const RecordedRun& run);  // inside the caller's transaction
  void update_stats(const std::string& table, const std::string& where,
                    const std::vector<std::string>& keys, const Evidence& evidence,
                    const std::string& now);

  std::filesystem::path path_;
  ImportSummary seed_additions_;
  std::unique_ptr<sqlite::Database> db_;
};

/// One line for the console when `store` gained nodes from the seed on open ("" when none):
/// "memory FILE: added 2 strategies of this kforge's seed it did not have (its evidence is
/// unchanged)".
std::string describe_seed_additions(const SqliteStore& store);

}  // namespace kforge::memory

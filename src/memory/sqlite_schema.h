// The memory database's schema: numbered migrations and the statistics columns shared by
// directions, strategies and edge lags. Used only by the SQLite store (sqlite_store.cpp,
// sqlite_transfer.cpp).
//
// Schema history (PRAGMA user_version):
//   1  directions, strategies, edges (with one set of statistics per edge), evidence with one
//      previous direction and a free-form note
//   2  compile and correctness successes on every node; edge statistics per lag in edge_lags
//      (lag 1..kMaxLag); evidence keeps its prefix (JSON array, most recent first), its excerpt
//      (the v1 note's change part), failure_reason and the diagnosis it was chosen under.
//      Migrating 1 -> 2 splits each v1 note "change | message" of a failed attempt into excerpt
//      and failure_reason and recomputes every statistic from the evidence rows.
//   3  recorded runs (recorded_run.h): runs (kind "eval", task, command, provenance) and
//      run_candidates (source, verdict, timings, speedup with its interval), beside the evidence.
//   4  an index on evidence(task_hash, created_at), the key of import's duplicate check: without
//      it each imported row scanned its whole direction, so a Slurm suite's merge of one job
//      grew with the square of the memory (186 s at 50k rows; bench/slurm/driver_costs.json).
#pragma once

#include <string>
#include <vector>

#include "memory/htg.h"
#include "memory/sqlite_statement.h"

namespace kforge::memory::schema {

/// The schema version this build writes.
inline constexpr int kVersion = 4;

/// The current time as ISO-8601 UTC with milliseconds ("2026-12-05T06:01:02.345Z").
std::string now_utc_iso8601();

/// Statistics columns in the order stats_from() reads them.
inline constexpr const char* kStatsSelect =
    "attempts, compile_successes, correct_successes, successes, ok_attempts, mean_log_gain, "
    "ema_log_gain, last_used";

/// Reads the eight kStatsSelect columns starting at `first_column`.
Stats stats_from(const sqlite::Statement& row, int first_column);

/// Adds one attempt to `stats` (the definitions in htg.h, Stats; ema with kEmaWeight),
/// stamping last_used = `now`.
void accumulate(Stats& stats, const Evidence& evidence, const std::string& now);

/// Brings the database from its user_version to kVersion, one transaction per step.
/// Throws Error naming `path` when the file is newer than this build.
void migrate(sqlite::Database& db, const std::string& path);

/// Recomputes every statistic (directions, strategies, edge lags) from the evidence rows in
/// insertion order; creates edge rows (prior 0) that evidence needs. Call inside a transaction.
void rebuild_stats(sqlite::Database& db);

/// JSON text of a list of strings, and back (errors name `where` and the database path).
std::string to_json(const std::vector<std::string>& values);
std::vector<std::string> strings_column(const sqlite::Database& db, const std::string& where,
                                        const std::string& text);

}  // namespace kforge::memory::schema

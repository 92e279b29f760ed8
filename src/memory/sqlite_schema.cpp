#include "memory/sqlite_schema.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "memory/weighting.h"

namespace kforge::memory::schema {
namespace {

// Version 0 -> 1: the initial schema (as released; never edit). Lists are JSON arrays of
// strings; edits a JSON array of {"param", "op", "value"} objects.
void migrate_to_1(sqlite::Database& db) {
  const std::string stats =
      "attempts INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, "
      "ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, "
      "ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT ''";
  db.exec(
      "CREATE TABLE directions (id TEXT PRIMARY KEY, title TEXT NOT NULL, goal TEXT NOT NULL, "
      "triggers TEXT NOT NULL, risks TEXT NOT NULL, backends TEXT NOT NULL, prior REAL NOT NULL, " +
      stats + ");");
  db.exec(
      "CREATE TABLE strategies (id TEXT PRIMARY KEY, "
      "direction_id TEXT NOT NULL REFERENCES directions(id), title TEXT NOT NULL, "
      "edit_pattern TEXT NOT NULL, validation TEXT NOT NULL, triggers TEXT NOT NULL, "
      "edits TEXT NOT NULL, backends TEXT NOT NULL, " +
      stats +
      ");"
      "CREATE INDEX strategies_by_direction ON strategies(direction_id);");
  db.exec(
      "CREATE TABLE edges (from_direction TEXT NOT NULL REFERENCES directions(id), "
      "to_direction TEXT NOT NULL REFERENCES directions(id), rationale TEXT NOT NULL DEFAULT '', "
      "risks TEXT NOT NULL DEFAULT '', prior REAL NOT NULL DEFAULT 0, " +
      stats + ", PRIMARY KEY (from_direction, to_direction));");
  db.exec(
      "CREATE TABLE evidence (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, "
      "direction_id TEXT NOT NULL REFERENCES directions(id), "
      "strategy_id TEXT REFERENCES strategies(id), "
      "previous_direction_id TEXT REFERENCES directions(id), verdict TEXT NOT NULL, "
      "log_gain REAL, speedup_vs_baseline REAL, candidate_id TEXT NOT NULL, note TEXT NOT NULL, "
      "backend TEXT NOT NULL, device TEXT NOT NULL, compute_capability TEXT NOT NULL, "
      "toolchain TEXT NOT NULL, family TEXT NOT NULL, task_hash TEXT NOT NULL);"
      "CREATE INDEX evidence_by_direction ON evidence(direction_id);");
}

// Version 1 -> 2 (see sqlite_schema.h). DROP COLUMN needs SQLite >= 3.35 (Debian 12: 3.40).
void migrate_to_2(sqlite::Database& db) {
  for (const char* table : {"directions", "strategies"}) {
    db.exec(std::string("ALTER TABLE ") + table +
            " ADD COLUMN compile_successes INTEGER NOT NULL DEFAULT 0;"
            "ALTER TABLE " +
            table + " ADD COLUMN correct_successes INTEGER NOT NULL DEFAULT 0;");
  }
  db.exec(
      "CREATE TABLE edge_lags (from_direction TEXT NOT NULL, to_direction TEXT NOT NULL, "
      "lag INTEGER NOT NULL CHECK (lag BETWEEN 1 AND 3), "
      "attempts INTEGER NOT NULL DEFAULT 0, compile_successes INTEGER NOT NULL DEFAULT 0, "
      "correct_successes INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, "
      "ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, "
      "ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT '', "
      "PRIMARY KEY (from_direction, to_direction, lag), "
      "FOREIGN KEY (from_direction, to_direction) REFERENCES edges(from_direction, "
      "to_direction));");
  for (const char* column :
       {"attempts", "successes", "ok_attempts", "mean_log_gain", "ema_log_gain", "last_used"}) {
    db.exec(std::string("ALTER TABLE edges DROP COLUMN ") + column);
  }
  db.exec(
      "ALTER TABLE evidence RENAME COLUMN note TO excerpt;"
      "ALTER TABLE evidence ADD COLUMN prefix TEXT NOT NULL DEFAULT '[]';"
      "ALTER TABLE evidence ADD COLUMN failure_reason TEXT NOT NULL DEFAULT '';"
      "ALTER TABLE evidence ADD COLUMN diagnosis TEXT NOT NULL DEFAULT '';"
      "UPDATE evidence SET prefix = json_array(previous_direction_id) "
      "  WHERE previous_direction_id IS NOT NULL;"
      // v1 wrote "change | message" for every attempt with a message.
      "UPDATE evidence SET failure_reason = substr(excerpt, instr(excerpt, ' | ') + 3), "
      "  excerpt = substr(excerpt, 1, instr(excerpt, ' | ') - 1) "
      "  WHERE verdict <> 'ok' AND instr(excerpt, ' | ') > 0;"
      "CREATE INDEX evidence_by_backend ON evidence(backend);");
  rebuild_stats(db);
}

// Version 2 -> 3 (see sqlite_schema.h): recorded runs beside the evidence. A run's candidates
// go with it (ON DELETE CASCADE) when a reset deletes the runs.
void migrate_to_3(sqlite::Database& db) {
  db.exec(
      "CREATE TABLE runs (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, kind TEXT NOT NULL, "
      "task TEXT NOT NULL, command TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL, "
      "compute_capability TEXT NOT NULL, toolchain TEXT NOT NULL, family TEXT NOT NULL, "
      "task_hash TEXT NOT NULL);"
      "CREATE INDEX runs_by_task ON runs(task_hash);"
      "CREATE TABLE run_candidates (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE "
      "CASCADE, position INTEGER NOT NULL, candidate_id TEXT NOT NULL, source_name TEXT NOT NULL, "
      "source TEXT NOT NULL, verdict TEXT NOT NULL, message TEXT NOT NULL, failed_at TEXT NOT "
      "NULL, median_ms REAL, reference_median_ms REAL, speedup REAL, ci_low REAL, ci_high REAL, "
      "level REAL, PRIMARY KEY (run_id, position));");
}

// Version 3 -> 4: the duplicate check of import (sqlite_transfer.cpp) looks evidence up by
// task_hash and created_at first; the direction index alone made it a scan per row.
void migrate_to_4(sqlite::Database& db) {
  db.exec("CREATE INDEX evidence_by_task_time ON evidence(task_hash, created_at);");
}

// kMigrations[v] takes a database from user_version v to v + 1. Append, never edit.
using Migration = void (*)(sqlite::Database&);
constexpr Migration kMigrations[] = {migrate_to_1, migrate_to_2, migrate_to_3, migrate_to_4};
static_assert(std::size(kMigrations) == kVersion);

void write_stats(sqlite::Database& db, const std::string& table, const std::string& where,
                 const std::vector<std::string>& keys, const Stats& s) {
  sqlite::Statement update(db, "UPDATE " + table +
                                   " SET attempts = ?1, compile_successes = ?2, "
                                   "correct_successes = ?3, successes = ?4, ok_attempts = ?5, "
                                   "mean_log_gain = ?6, ema_log_gain = ?7, last_used = ?8 WHERE " +
                                   where);
  update.bind(1, s.attempts).bind(2, s.compile_successes).bind(3, s.correct_successes);
  update.bind(4, s.successes).bind(5, s.ok_attempts).bind(6, s.mean_log_gain);
  update.bind(7, s.ema_log_gain).bind(8, s.last_used);
  for (std::size_t i = 0; i < keys.size(); ++i) update.bind(static_cast<int>(i) + 9, keys[i]);
  update.run();
}

}  // namespace

std::string now_utc_iso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char result[40];
  std::snprintf(result, sizeof result, "%.*s.%03dZ", static_cast<int>(length), text,
                static_cast<int>(millis.count()));
  return result;
}

Stats stats_from(const sqlite::Statement& row, int first_column) {
  Stats stats;
  stats.attempts = row.integer(first_column);
  stats.compile_successes = row.integer(first_column + 1);
  stats.correct_successes = row.integer(first_column + 2);
  stats.successes = row.integer(first_column + 3);
  stats.ok_attempts = row.integer(first_column + 4);
  stats.mean_log_gain = row.real(first_column + 5);
  stats.ema_log_gain = row.real(first_column + 6);
  stats.last_used = row.text(first_column + 7);
  return stats;
}

void accumulate(Stats& stats, const Evidence& evidence, const std::string& now) {
  stats.attempts += 1;
  if (evidence.verdict != "compile_error" && evidence.verdict != "rejected_by_policy") {
    stats.compile_successes += 1;
  }
  if (evidence.verdict == "ok") stats.correct_successes += 1;
  if (evidence.verdict == "ok" && evidence.log_gain.has_value()) {
    const double gain = *evidence.log_gain;
    stats.ok_attempts += 1;
    stats.mean_log_gain += (gain - stats.mean_log_gain) / static_cast<double>(stats.ok_attempts);
    stats.ema_log_gain += kEmaWeight * (gain - stats.ema_log_gain);
    if (gain > 0.0) stats.successes += 1;
  }
  stats.last_used = now;
}

void migrate(sqlite::Database& db, const std::string& path) {
  sqlite::Statement query(db, "PRAGMA user_version");
  query.step();
  int version = static_cast<int>(query.integer(0));
  if (version > kVersion) {
    throw Error(path + ": memory schema version " + std::to_string(version) +
                " is newer than this kforge supports (" + std::to_string(kVersion) +
                "); upgrade kforge, or point --memory / KFORGE_MEMORY elsewhere (the file was "
                "left unchanged)");
  }
  for (; version < kVersion; ++version) {
    sqlite::Transaction transaction(db);
    kMigrations[version](db);
    db.exec("PRAGMA user_version = " + std::to_string(version + 1));
    transaction.commit();
  }
}

void rebuild_stats(sqlite::Database& db) {
  std::map<std::string, Stats> directions;
  std::map<std::string, Stats> strategies;
  std::map<std::tuple<std::string, std::string, int>, Stats> lags;
  sqlite::Statement rows(db,
                         "SELECT direction_id, strategy_id, prefix, verdict, log_gain, created_at "
                         "FROM evidence ORDER BY id");
  while (rows.step()) {
    Evidence e;
    e.direction_id = rows.text(0);
    e.strategy_id = rows.text(1);
    e.prefix = strings_column(db, "evidence column prefix", rows.text(2));
    e.verdict = rows.text(3);
    e.log_gain = rows.optional_real(4);
    const std::string when = rows.text(5);
    accumulate(directions[e.direction_id], e, when);
    if (!e.strategy_id.empty()) accumulate(strategies[e.strategy_id], e, when);
    for (std::size_t j = 0; j < e.prefix.size() && j < static_cast<std::size_t>(kMaxLag); ++j) {
      accumulate(lags[{e.prefix[j], e.direction_id, static_cast<int>(j) + 1}], e, when);
    }
  }
  db.exec(
      "UPDATE directions SET attempts = 0, compile_successes = 0, correct_successes = 0, "
      "successes = 0, ok_attempts = 0, mean_log_gain = 0, ema_log_gain = 0, last_used = '';"
      "UPDATE strategies SET attempts = 0, compile_successes = 0, correct_successes = 0, "
      "successes = 0, ok_attempts = 0, mean_log_gain = 0, ema_log_gain = 0, last_used = '';"
      "DELETE FROM edge_lags;");
  for (const auto& [id, stats] : directions) write_stats(db, "directions", "id = ?9", {id}, stats);
  for (const auto& [id, stats] : strategies) write_stats(db, "strategies", "id = ?9", {id}, stats);
  for (const auto& [key, stats] : lags) {
    const auto& [from, to, lag] = key;
    sqlite::Statement edge(db,
                           "INSERT OR IGNORE INTO edges (from_direction, to_direction) "
                           "VALUES (?1, ?2)");
    edge.bind(1, from).bind(2, to).run();
    sqlite::Statement row(db,
                          "INSERT INTO edge_lags (from_direction, to_direction, lag) "
                          "VALUES (?1, ?2, ?3)");
    row.bind(1, from).bind(2, to).bind(3, int64_t{lag}).run();
    write_stats(db, "edge_lags", "from_direction = ?9 AND to_direction = ?10 AND lag = ?11",
                {from, to, std::to_string(lag)}, stats);
  }
}

std::string to_json(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump();
}

std::vector<std::string> strings_column(const sqlite::Database& db, const std::string& where,
                                        const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(db.path() + ": " + where + ": expected a JSON array of strings, got '" + text +
                "': " + e.what());
  }
}

}  // namespace kforge::memory::schema

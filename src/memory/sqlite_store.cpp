#include "memory/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "common/error.h"
#include "memory/sqlite_statement.h"

namespace kforge::memory {
namespace {

// A record() transaction takes milliseconds; 5 s lets a concurrent kforge process finish its
// write, yet a stuck process surfaces as an error instead of hanging the run.
constexpr int kBusyTimeoutMs = 5000;

// The statistics columns shared by directions, strategies and edges.
constexpr const char* kStatsColumns =
    "attempts INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, "
    "ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, "
    "ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT ''";
constexpr const char* kStatsSelect =
    "attempts, successes, ok_attempts, mean_log_gain, ema_log_gain, last_used";

// Version 0 -> 1: the initial schema. Lists are JSON arrays of strings; edits a JSON array of
// {"param", "op", "value"} objects.
void migrate_to_1(sqlite::Database& db) {
  const std::string stats = kStatsColumns;
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

// kMigrations[v] takes a database from user_version v to v + 1. Append, never edit.
using Migration = void (*)(sqlite::Database&);
constexpr Migration kMigrations[] = {migrate_to_1};
static_assert(std::size(kMigrations) == SqliteStore::kSchemaVersion);

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

std::string to_json(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump();
}

std::string to_json(const std::vector<ParamEdit>& edits) {
  nlohmann::json array = nlohmann::json::array();
  for (const ParamEdit& edit : edits) {
    array.push_back({{"param", edit.param}, {"op", edit.op}, {"value", edit.value}});
  }
  return array.dump();
}

nlohmann::json parse_column(const sqlite::Database& db, const std::string& where,
                            const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(db.path() + ": " + where + ": expected a JSON array, got '" + text +
                "': " + e.what());
  }
}

std::vector<std::string> strings_column(const sqlite::Database& db, const std::string& where,
                                        const std::string& text) {
  try {
    return parse_column(db, where, text).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(db.path() + ": " + where + ": expected a JSON array of strings: " + e.what());
  }
}

std::vector<ParamEdit> edits_column(const sqlite::Database& db, const std::string& where,
                                    const std::string& text) {
  std::vector<ParamEdit> edits;
  try {
    for (const nlohmann::json& item : parse_column(db, where, text)) {
      edits.push_back({item.at("param").get<std::string>(), item.at("op").get<std::string>(),
                       item.at("value").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(db.path() + ": " + where + ": expected [{param, op, value}]: " + e.what());
  }
  return edits;
}

Stats stats_from(const sqlite::Statement& row, int first_column) {
  Stats stats;
  stats.attempts = row.integer(first_column);
  stats.successes = row.integer(first_column + 1);
  stats.ok_attempts = row.integer(first_column + 2);
  stats.mean_log_gain = row.real(first_column + 3);
  stats.ema_log_gain = row.real(first_column + 4);
  stats.last_used = row.text(first_column + 5);
  return stats;
}

bool direction_exists(sqlite::Database& db, const std::string& id) {
  sqlite::Statement query(db, "SELECT 1 FROM directions WHERE id = ?1");
  query.bind(1, id);
  return query.step();
}

}  // namespace

std::filesystem::path default_memory_path() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (std::string path = env("KFORGE_MEMORY_DB"); !path.empty()) return path;
  if (std::string data = env("XDG_DATA_HOME"); !data.empty()) {
    return std::filesystem::path(data) / "kforge" / "memory.sqlite";
  }
  if (std::string home = env("HOME"); !home.empty()) {
    return std::filesystem::path(home) / ".local" / "share" / "kforge" / "memory.sqlite";
  }
  throw Error("cannot locate the memory database: set KFORGE_MEMORY_DB, XDG_DATA_HOME or HOME");
}

namespace {

// PRAGMA application_id of kforge memory files ("kfor"), so that kforge never adopts, converts
// or writes into another program's SQLite database given by mistake.
constexpr int64_t kApplicationId = 0x6B666F72;

int64_t pragma_integer(sqlite::Database& db, const std::string& pragma) {
  sqlite::Statement query(db, "PRAGMA " + pragma);
  query.step();
  return query.integer(0);
}

// Accepts a new (empty) file, or one kforge made; refuses anything else before it is changed.
void check_ownership(sqlite::Database& db) {
  int64_t application_id = pragma_integer(db, "application_id");
  if (application_id == kApplicationId) return;
  if (application_id != 0) throw Error("it belongs to another application");
  int64_t user_version = pragma_integer(db, "user_version");
  sqlite::Statement tables(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::string names;
  while (tables.step()) names += (names.empty() ? "" : ", ") + tables.text(0);
  if (user_version == 0 && !names.empty()) {
    throw Error("it already holds other tables (" + names + ")");
  }
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
}

}  // namespace

SqliteStore::SqliteStore(std::filesystem::path path, std::unique_ptr<sqlite::Database> db)
    : path_(std::move(path)), db_(std::move(db)) {}

SqliteStore::~SqliteStore() = default;

std::unique_ptr<SqliteStore> SqliteStore::open(const std::filesystem::path& path,
                                               const std::filesystem::path& seed_knowledge_path) {
  if (path != ":memory:" && path.has_parent_path()) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    if (error) {
      throw Error("cannot create directory " + path.parent_path().string() +
                  " for the memory "
                  "database: " +
                  error.message());
    }
  }
  auto db = std::make_unique<sqlite::Database>(path.string(), kBusyTimeoutMs);
  with_context(path.string() + ": not a kforge memory database (choose another --memory or "
                               "KFORGE_MEMORY_DB)",
               [&] { check_ownership(*db); });
  // WAL lets readers proceed while another process records evidence; the pragma answers with
  // the mode in effect ("memory" for :memory:), which we accept as is.
  db->exec("PRAGMA journal_mode = WAL");
  db->exec("PRAGMA foreign_keys = ON");
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, std::move(db)));
  store->migrate();
  if (!seed_knowledge_path.empty() && store->directions("").empty()) {
    with_context("while seeding memory database " + path.string(),
                 [&] { store->seed(load_knowledge(seed_knowledge_path)); });
  }
  return store;
}

int SqliteStore::schema_version() {
  sqlite::Statement query(*db_, "PRAGMA user_version");
  query.step();
  return static_cast<int>(query.integer(0));
}

void SqliteStore::migrate() {
  int version = schema_version();
  if (version > kSchemaVersion) {
    throw Error(path_.string() + ": memory schema version " + std::to_string(version) +
                " is newer than this kforge supports (" + std::to_string(kSchemaVersion) +
                "); upgrade kforge or point KFORGE_MEMORY_DB elsewhere");
  }
  for (; version < kSchemaVersion; ++version) {
    sqlite::Transaction transaction(*db_);
    kMigrations[version](*db_);
    db_->exec("PRAGMA user_version = " + std::to_string(version + 1));
    transaction.commit();
  }
}

void SqliteStore::seed(const Knowledge& knowledge) {
  sqlite::Transaction transaction(*db_);
  for (const Direction& d : knowledge.directions) {
    sqlite::Statement insert(*db_,
                             "INSERT INTO directions (id, title, goal, triggers, risks, backends, "
                             "prior) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    insert.bind(1, d.id).bind(2, d.title).bind(3, d.goal).bind(4, to_json(d.triggers));
    insert.bind(5, to_json(d.risks)).bind(6, to_json(d.backends)).bind(7, d.prior).run();
  }
  for (const Strategy& s : knowledge.strategies) {
    sqlite::Statement insert(*db_,
                             "INSERT INTO strategies (id, direction_id, title, edit_pattern, "
                             "validation, triggers, edits, backends) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    insert.bind(1, s.id).bind(2, s.direction_id).bind(3, s.title).bind(4, s.edit_pattern);
    insert.bind(5, to_json(s.validation)).bind(6, to_json(s.triggers)).bind(7, to_json(s.edits));
    insert.bind(8, to_json(s.backends)).run();
  }
  for (const Edge& e : knowledge.edges) {
    sqlite::Statement insert(*db_,
                             "INSERT INTO edges (from_direction, to_direction, rationale, risks, "
                             "prior) VALUES (?1, ?2, ?3, ?4, ?5)");
    insert.bind(1, e.from_direction).bind(2, e.to_direction).bind(3, e.rationale);
    insert.bind(4, e.risks).bind(5, e.prior).run();
  }
  transaction.commit();
}

std::vector<Direction> SqliteStore::directions(const std::string& backend) {
  sqlite::Statement query(*db_, std::string("SELECT id, title, goal, triggers, risks, backends, "
                                            "prior, ") +
                                    kStatsSelect + " FROM directions ORDER BY rowid");
  std::vector<Direction> result;
  while (query.step()) {
    Direction d;
    d.id = query.text(0);
    const std::string where = "directions '" + d.id + "'";
    d.backends = strings_column(*db_, where + " column backends", query.text(5));
    if (!backend.empty() &&
        std::find(d.backends.begin(), d.backends.end(), backend) == d.backends.end()) {
      continue;
    }
    d.title = query.text(1);
    d.goal = query.text(2);
    d.triggers = strings_column(*db_, where + " column triggers", query.text(3));
    d.risks = strings_column(*db_, where + " column risks", query.text(4));
    d.prior = query.real(6);
    d.stats = stats_from(query, 7);
    result.push_back(std::move(d));
  }
  return result;
}

std::vector<Strategy> SqliteStore::strategies(const std::string& direction_id) {
  sqlite::Statement query(*db_, std::string("SELECT id, direction_id, title, edit_pattern, "
                                            "validation, triggers, edits, backends, ") +
                                    kStatsSelect +
                                    " FROM strategies WHERE direction_id = ?1 ORDER BY rowid");
  query.bind(1, direction_id);
  std::vector<Strategy> result;
  while (query.step()) {
    Strategy s;
    s.id = query.text(0);
    const std::string where = "strategies '" + s.id + "'";
    s.direction_id = query.text(1);
    s.title = query.text(2);
    s.edit_pattern = query.text(3);
    s.validation = strings_column(*db_, where + " column validation", query.text(4));
    s.triggers = strings_column(*db_, where + " column triggers", query.text(5));
    s.edits = edits_column(*db_, where + " column edits", query.text(6));
    s.backends = strings_column(*db_, where + " column backends", query.text(7));
    s.stats = stats_from(query, 8);
    result.push_back(std::move(s));
  }
  return result;
}

std::optional<Edge> SqliteStore::edge(const std::string& from_direction,
                                      const std::string& to_direction) {
  sqlite::Statement query(*db_, std::string("SELECT rationale, risks, prior, ") + kStatsSelect +
                                    " FROM edges WHERE from_direction = ?1 AND to_direction = ?2");
  query.bind(1, from_direction).bind(2, to_direction);
  if (!query.step()) return std::nullopt;
  Edge e;
  e.from_direction = from_direction;
  e.to_direction = to_direction;
  e.rationale = query.text(0);
  e.risks = query.text(1);
  e.prior = query.real(2);
  e.stats = stats_from(query, 3);
  return e;
}

// ema_log_gain is an exponential moving average with weight kEmaWeight = 0.3 on the newest
// observation: its memory is about 1 / 0.3 ~ 3 attempts (half-life ~2), so the trend turns
// within one HTAM run of ~6 steps, while a single noisy measurement moves it by only 30%. It
// starts at 0 ("no change"), which shrinks the first few observations toward neutral.
void SqliteStore::update_stats(const std::string& table, const std::string& key_condition,
                               const std::vector<std::string>& keys, const Evidence& evidence,
                               const std::string& now) {
  const bool has_gain = evidence.verdict == "ok" && evidence.log_gain.has_value();
  const bool success = has_gain && *evidence.log_gain > 0.0;
  sqlite::Statement update(
      *db_, "UPDATE " + table +
                " SET attempts = attempts + 1, successes = successes + ?1, "
                "ok_attempts = ok_attempts + ?2, "
                "mean_log_gain = CASE WHEN ?2 THEN mean_log_gain + (?3 - mean_log_gain) / "
                "(ok_attempts + 1) ELSE mean_log_gain END, "
                "ema_log_gain = CASE WHEN ?2 THEN ema_log_gain + ?4 * (?3 - ema_log_gain) "
                "ELSE ema_log_gain END, last_used = ?5 WHERE " +
                key_condition);
  update.bind(1, int64_t{success ? 1 : 0}).bind(2, int64_t{has_gain ? 1 : 0});
  update.bind(3, has_gain ? *evidence.log_gain : 0.0).bind(4, kEmaWeight).bind(5, now);
  for (std::size_t i = 0; i < keys.size(); ++i) update.bind(static_cast<int>(i) + 6, keys[i]);
  update.run();
  if (db_->changes() != 1) {
    throw Error(path_.string() + ": cannot record evidence: no row in " + table + " where " +
                key_condition + " for '" + keys.front() + "'");
  }
}

void SqliteStore::record(const Evidence& evidence) {
  const std::string context = "while recording evidence for direction '" + evidence.direction_id +
                              "', strategy '" + evidence.strategy_id + "' in " + path_.string();
  if (evidence.log_gain.has_value() && !std::isfinite(*evidence.log_gain)) {
    throw Error(context + ": log_gain must be finite");
  }
  sqlite::Transaction transaction(*db_);
  const std::string now = now_utc_iso8601();
  if (!direction_exists(*db_, evidence.direction_id)) {
    throw Error(context + ": unknown direction '" + evidence.direction_id + "'");
  }
  update_stats("directions", "id = ?6", {evidence.direction_id}, evidence, now);
  if (!evidence.strategy_id.empty()) {
    sqlite::Statement owner(*db_, "SELECT 1 FROM strategies WHERE id = ?1 AND direction_id = ?2");
    owner.bind(1, evidence.strategy_id).bind(2, evidence.direction_id);
    if (!owner.step()) {
      throw Error(context + ": no strategy '" + evidence.strategy_id + "' under direction '" +
                  evidence.direction_id + "'");
    }
    update_stats("strategies", "id = ?6", {evidence.strategy_id}, evidence, now);
  }
  if (!evidence.previous_direction_id.empty()) {
    if (!direction_exists(*db_, evidence.previous_direction_id)) {
      throw Error(context + ": unknown previous direction '" + evidence.previous_direction_id +
                  "'");
    }
    sqlite::Statement create(*db_,
                             "INSERT OR IGNORE INTO edges (from_direction, to_direction) "
                             "VALUES (?1, ?2)");
    create.bind(1, evidence.previous_direction_id).bind(2, evidence.direction_id).run();
    update_stats("edges", "from_direction = ?6 AND to_direction = ?7",
                 {evidence.previous_direction_id, evidence.direction_id}, evidence, now);
  }
  sqlite::Statement insert(
      *db_,
      "INSERT INTO evidence (created_at, direction_id, strategy_id, previous_direction_id, "
      "verdict, log_gain, speedup_vs_baseline, candidate_id, note, backend, device, "
      "compute_capability, toolchain, family, task_hash) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
  const Provenance& p = evidence.provenance;
  insert.bind(1, now).bind(2, evidence.direction_id).bind_text_or_null(3, evidence.strategy_id);
  insert.bind_text_or_null(4, evidence.previous_direction_id).bind(5, evidence.verdict);
  insert.bind(6, evidence.log_gain).bind(7, evidence.speedup_vs_baseline);
  insert.bind(8, evidence.candidate_id).bind(9, evidence.note).bind(10, p.backend);
  insert.bind(11, p.device).bind(12, p.compute_capability).bind(13, p.toolchain);
  insert.bind(14, p.family).bind(15, p.task_hash).run();
  transaction.commit();
}

int64_t SqliteStore::evidence_count() {
  sqlite::Statement query(*db_, "SELECT count(*) FROM evidence");
  query.step();
  return query.integer(0);
}

}  // namespace kforge::memory

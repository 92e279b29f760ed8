#include "memory/sqlite_store.h"

#include <algorithm>
#include <array>
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
#include "memory/sqlite_schema.h"
#include "memory/sqlite_statement.h"

namespace kforge::memory {
namespace {

using schema::kStatsSelect;
using schema::now_utc_iso8601;
using schema::stats_from;
using schema::strings_column;
using schema::to_json;

std::string to_json(const std::vector<ParamEdit>& edits) {
  nlohmann::json array = nlohmann::json::array();
  for (const ParamEdit& edit : edits) {
    array.push_back({{"param", edit.param}, {"op", edit.op}, {"value", edit.value}});
  }
  return array.dump();
}

std::vector<ParamEdit> edits_column(const sqlite::Database& db, const std::string& where,
                                    const std::string& text) {
  std::vector<ParamEdit> edits;
  try {
    for (const nlohmann::json& item : nlohmann::json::parse(text)) {
      edits.push_back({item.at("param").get<std::string>(), item.at("op").get<std::string>(),
                       item.at("value").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(db.path() + ": " + where + ": expected [{param, op, value}]: " + e.what());
  }
  return edits;
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
  if (std::string path = env("KFORGE_MEMORY"); !path.empty()) return path;
  if (std::string path = env("KFORGE_MEMORY_DB"); !path.empty()) return path;
  if (std::string data = env("XDG_DATA_HOME"); !data.empty()) {
    return std::filesystem::path(data) / "kforge" / "memory.sqlite";
  }
  if (std::string home = env("HOME"); !home.empty()) {
    return std::filesystem::path(home) / ".local" / "share" / "kforge" / "memory.sqlite";
  }
  throw Error("cannot locate the memory database: set KFORGE_MEMORY, XDG_DATA_HOME or HOME");
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
  // A kforge memory made before application_id was set has a user_version and a directions
  // table; another SQLite file with a user_version (a kforge run.sqlite, say) is not one.
  if (user_version != 0 && !names.empty() &&
      (", " + names + ", ").find(", directions, ") == std::string::npos) {
    throw Error("it has schema version " + std::to_string(user_version) +
                " but no kforge memory tables (it holds " + names + ")");
  }
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
}

}  // namespace

SqliteStore::SqliteStore(std::filesystem::path path, std::unique_ptr<sqlite::Database> db)
    : path_(std::move(path)), db_(std::move(db)) {}

SqliteStore::~SqliteStore() = default;

std::unique_ptr<SqliteStore> SqliteStore::open_database(const std::filesystem::path& path,
                                                        int busy_timeout_ms) {
  if (path != ":memory:" && path.has_parent_path()) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    if (error) {
      throw Error("cannot create directory " + path.parent_path().string() +
                  " for the memory database: " + error.message());
    }
  }
  auto db = std::make_unique<sqlite::Database>(path.string(), busy_timeout_ms);
  with_context(path.string() +
                   ": not a kforge memory database, or corrupt (choose another "
                   "--memory or KFORGE_MEMORY; the file was left unchanged)",
               [&] { check_ownership(*db); });
  // WAL lets readers proceed while another process records evidence; the pragma answers with
  // the mode in effect ("memory" for :memory:), which we accept as is.
  db->exec("PRAGMA journal_mode = WAL");
  db->exec("PRAGMA foreign_keys = ON");
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, std::move(db)));
  schema::migrate(*store->db_, path.string());
  return store;
}

std::unique_ptr<SqliteStore> SqliteStore::open(const std::filesystem::path& path,
                                               const std::filesystem::path& seed_knowledge_path,
                                               int busy_timeout_ms) {
  std::unique_ptr<SqliteStore> store = open_database(path, busy_timeout_ms);
  if (seed_knowledge_path.empty()) return store;
  const bool seeded = !store->directions("").empty();
  // A seeded graph only gains what the seed adds: without a seed file there is nothing to add.
  if (seeded && !std::filesystem::exists(seed_knowledge_path)) return store;
  with_context("while seeding memory database " + path.string(), [&] {
    const Knowledge seed = load_knowledge(seed_knowledge_path);
    if (!seeded) {
      store->seed(seed);
    } else {
      store->seed_additions_ = store->add_missing_seed(seed);
    }
  });
  return store;
}

std::unique_ptr<SqliteStore> SqliteStore::open(const std::filesystem::path& path,
                                               const Knowledge& seed, int busy_timeout_ms) {
  std::unique_ptr<SqliteStore> store = open_database(path, busy_timeout_ms);
  with_context("while seeding memory database " + path.string(), [&] {
    if (store->directions("").empty()) {
      store->seed(seed);
    } else {
      store->seed_additions_ = store->add_missing_seed(seed);
    }
  });
  return store;
}

int SqliteStore::schema_version() {
  sqlite::Statement query(*db_, "PRAGMA user_version");
  query.step();
  return static_cast<int>(query.integer(0));
}

void SqliteStore::insert_direction(const Direction& d) {
  sqlite::Statement insert(*db_,
                           "INSERT INTO directions (id, title, goal, triggers, risks, backends, "
                           "prior) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  insert.bind(1, d.id).bind(2, d.title).bind(3, d.goal).bind(4, to_json(d.triggers));
  insert.bind(5, to_json(d.risks)).bind(6, to_json(d.backends)).bind(7, d.prior).run();
}

void SqliteStore::insert_strategy(const Strategy& s) {
  sqlite::Statement insert(*db_,
                           "INSERT INTO strategies (id, direction_id, title, edit_pattern, "
                           "validation, triggers, edits, backends) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  insert.bind(1, s.id).bind(2, s.direction_id).bind(3, s.title).bind(4, s.edit_pattern);
  insert.bind(5, to_json(s.validation)).bind(6, to_json(s.triggers)).bind(7, to_json(s.edits));
  insert.bind(8, to_json(s.backends)).run();
}

void SqliteStore::insert_edge(const Edge& e) {
  sqlite::Statement insert(*db_,
                           "INSERT INTO edges (from_direction, to_direction, rationale, risks, "
                           "prior) VALUES (?1, ?2, ?3, ?4, ?5)");
  insert.bind(1, e.from_direction).bind(2, e.to_direction).bind(3, e.rationale);
  insert.bind(4, e.risks).bind(5, e.prior).run();
}

void SqliteStore::seed(const Knowledge& knowledge) {
  sqlite::Transaction transaction(*db_);
  for (const Direction& d : knowledge.directions) insert_direction(d);
  for (const Strategy& s : knowledge.strategies) insert_strategy(s);
  for (const Edge& e : knowledge.edges) insert_edge(e);
  transaction.commit();
}

void SqliteStore::reset(const Knowledge& seed) {
  sqlite::Transaction transaction(*db_);
  db_->exec(
      "DELETE FROM run_candidates; DELETE FROM runs; "
      "DELETE FROM evidence; DELETE FROM edge_lags; DELETE FROM edges; DELETE FROM strategies; "
      "DELETE FROM directions;");
  for (const Direction& d : seed.directions) insert_direction(d);
  for (const Strategy& s : seed.strategies) insert_strategy(s);
  for (const Edge& e : seed.edges) insert_edge(e);
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

namespace {

// The per-lag statistics of (from, to), lag 1 first; zeros for lags without evidence.
std::array<Stats, kMaxLag> lag_stats(sqlite::Database& db, const std::string& from,
                                     const std::string& to) {
  std::array<Stats, kMaxLag> result{};
  sqlite::Statement query(db, std::string("SELECT lag, ") + kStatsSelect +
                                  " FROM edge_lags WHERE from_direction = ?1 AND "
                                  "to_direction = ?2");
  query.bind(1, from).bind(2, to);
  while (query.step()) {
    int64_t lag = query.integer(0);
    if (lag >= 1 && lag <= kMaxLag)
      result[static_cast<std::size_t>(lag - 1)] = stats_from(query, 1);
  }
  return result;
}

Evidence evidence_from(const sqlite::Database& db, const sqlite::Statement& row) {
  Evidence e;
  e.created_at = row.text(0);
  e.direction_id = row.text(1);
  e.strategy_id = row.text(2);
  e.prefix = strings_column(db, "evidence column prefix", row.text(3));
  e.verdict = row.text(4);
  e.log_gain = row.optional_real(5);
  e.speedup_vs_baseline = row.optional_real(6);
  e.candidate_id = row.text(7);
  e.excerpt = row.text(8);
  e.failure_reason = row.text(9);
  e.diagnosis = row.text(10);
  e.provenance = {row.text(11), row.text(12), row.text(13),
                  row.text(14), row.text(15), row.text(16)};
  return e;
}

}  // namespace

std::optional<Edge> SqliteStore::edge(const std::string& from_direction,
                                      const std::string& to_direction) {
  sqlite::Statement query(*db_,
                          "SELECT rationale, risks, prior FROM edges "
                          "WHERE from_direction = ?1 AND to_direction = ?2");
  query.bind(1, from_direction).bind(2, to_direction);
  if (!query.step()) return std::nullopt;
  Edge e;
  e.from_direction = from_direction;
  e.to_direction = to_direction;
  e.rationale = query.text(0);
  e.risks = query.text(1);
  e.prior = query.real(2);
  e.by_lag = lag_stats(*db_, from_direction, to_direction);
  return e;
}

std::vector<Edge> SqliteStore::edges() {
  // One query for all edges and their lags (a policy reads every edge at every decision).
  sqlite::Statement query(*db_, std::string("SELECT e.from_direction, e.to_direction, e.rationale, "
                                            "e.risks, e.prior, l.lag, ") +
                                    "l.attempts, l.compile_successes, l.correct_successes, "
                                    "l.successes, l.ok_attempts, l.mean_log_gain, "
                                    "l.ema_log_gain, l.last_used FROM edges e LEFT JOIN "
                                    "edge_lags l ON l.from_direction = e.from_direction AND "
                                    "l.to_direction = e.to_direction ORDER BY e.rowid, l.lag");
  std::vector<Edge> result;
  while (query.step()) {
    const std::string from = query.text(0), to = query.text(1);
    if (result.empty() || result.back().from_direction != from ||
        result.back().to_direction != to) {
      Edge e;
      e.from_direction = from;
      e.to_direction = to;
      e.rationale = query.text(2);
      e.risks = query.text(3);
      e.prior = query.real(4);
      result.push_back(std::move(e));
    }
    if (query.is_null(5)) continue;
    const int64_t lag = query.integer(5);
    if (lag >= 1 && lag <= kMaxLag) {
      result.back().by_lag[static_cast<std::size_t>(lag - 1)] = stats_from(query, 6);
    }
  }
  return result;
}

std::vector<Evidence> SqliteStore::evidence(const std::string& backend) {
  return evidence_after(backend, 0);
}

std::vector<Evidence> SqliteStore::evidence_after(const std::string& backend, int64_t after_id) {
  sqlite::Statement query(*db_,
                          "SELECT created_at, direction_id, strategy_id, prefix, verdict, "
                          "log_gain, speedup_vs_baseline, candidate_id, excerpt, failure_reason, "
                          "diagnosis, backend, device, compute_capability, toolchain, family, "
                          "task_hash FROM evidence WHERE (?1 = '' OR backend = ?1) AND id > ?2 "
                          "ORDER BY id");
  query.bind(1, backend).bind(2, after_id);
  std::vector<Evidence> result;
  while (query.step()) result.push_back(evidence_from(*db_, query));
  return result;
}

void SqliteStore::update_stats(const std::string& table, const std::string& where,
                               const std::vector<std::string>& keys, const Evidence& evidence,
                               const std::string& now) {
  sqlite::Statement read(
      *db_, std::string("SELECT ") + kStatsSelect + ", rowid FROM " + table + " WHERE " + where);
  for (std::size_t i = 0; i < keys.size(); ++i) read.bind(static_cast<int>(i) + 1, keys[i]);
  if (!read.step()) {
    throw Error(path_.string() + ": cannot record evidence: no row in " + table + " for '" +
                keys.front() + "'");
  }
  Stats stats = stats_from(read, 0);
  const int64_t rowid = read.integer(8);
  schema::accumulate(stats, evidence, now);
  sqlite::Statement write(*db_, "UPDATE " + table +
                                    " SET attempts = ?1, compile_successes = ?2, "
                                    "correct_successes = ?3, successes = ?4, ok_attempts = ?5, "
                                    "mean_log_gain = ?6, ema_log_gain = ?7, last_used = ?8 "
                                    "WHERE rowid = ?9");
  write.bind(1, stats.attempts).bind(2, stats.compile_successes);
  write.bind(3, stats.correct_successes).bind(4, stats.successes).bind(5, stats.ok_attempts);
  write.bind(6, stats.mean_log_gain).bind(7, stats.ema_log_gain).bind(8, stats.last_used);
  write.bind(9, rowid).run();
}

void SqliteStore::insert_evidence(const Evidence& evidence, const std::string& created_at) {
  std::vector<std::string> prefix = evidence.prefix;
  if (prefix.size() > static_cast<std::size_t>(kMaxLag)) prefix.resize(kMaxLag);
  sqlite::Statement insert(
      *db_,
      "INSERT INTO evidence (created_at, direction_id, strategy_id, previous_direction_id, "
      "verdict, log_gain, speedup_vs_baseline, candidate_id, excerpt, backend, device, "
      "compute_capability, toolchain, family, task_hash, prefix, failure_reason, diagnosis) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)");
  const Provenance& p = evidence.provenance;
  insert.bind(1, created_at).bind(2, evidence.direction_id);
  insert.bind_text_or_null(3, evidence.strategy_id);
  insert.bind_text_or_null(4, prefix.empty() ? "" : prefix.front()).bind(5, evidence.verdict);
  insert.bind(6, evidence.log_gain).bind(7, evidence.speedup_vs_baseline);
  insert.bind(8, evidence.candidate_id).bind(9, evidence.excerpt).bind(10, p.backend);
  insert.bind(11, p.device).bind(12, p.compute_capability).bind(13, p.toolchain);
  insert.bind(14, p.family).bind(15, p.task_hash).bind(16, to_json(prefix));
  insert.bind(17, evidence.failure_reason).bind(18, evidence.diagnosis).run();
}

void SqliteStore::record(const Evidence& evidence) {
  const std::string context = "while recording evidence for direction '" + evidence.direction_id +
                              "', strategy '" + evidence.strategy_id + "' in " + path_.string();
  if (evidence.log_gain.has_value() && !std::isfinite(*evidence.log_gain)) {
    throw Error(context + ": log_gain must be finite");
  }
  with_context(context, [&] {
    sqlite::Transaction transaction(*db_);
    const std::string now = now_utc_iso8601();
    if (!direction_exists(*db_, evidence.direction_id)) {
      throw Error("unknown direction '" + evidence.direction_id + "'");
    }
    update_stats("directions", "id = ?1", {evidence.direction_id}, evidence, now);
    if (!evidence.strategy_id.empty()) {
      sqlite::Statement owner(*db_, "SELECT 1 FROM strategies WHERE id = ?1 AND direction_id = ?2");
      owner.bind(1, evidence.strategy_id).bind(2, evidence.direction_id);
      if (!owner.step()) {
        throw Error("no strategy '" + evidence.strategy_id + "' under direction '" +
                    evidence.direction_id + "'");
      }
      update_stats("strategies", "id = ?1", {evidence.strategy_id}, evidence, now);
    }
    for (std::size_t j = 0; j < evidence.prefix.size() && j < kMaxLag; ++j) {
      const std::string& from = evidence.prefix[j];
      if (!direction_exists(*db_, from)) {
        throw Error("unknown direction '" + from + "' in the prefix (lag " + std::to_string(j + 1) +
                    ")");
      }
      sqlite::Statement create(*db_,
                               "INSERT OR IGNORE INTO edges (from_direction, to_direction) "
                               "VALUES (?1, ?2)");
      create.bind(1, from).bind(2, evidence.direction_id).run();
      sqlite::Statement lag_row(*db_,
                                "INSERT OR IGNORE INTO edge_lags (from_direction, to_direction, "
                                "lag) VALUES (?1, ?2, ?3)");
      lag_row.bind(1, from).bind(2, evidence.direction_id).bind(3, static_cast<int64_t>(j + 1));
      lag_row.run();
      update_stats("edge_lags", "from_direction = ?1 AND to_direction = ?2 AND lag = ?3",
                   {from, evidence.direction_id, std::to_string(j + 1)}, evidence, now);
    }
    insert_evidence(evidence, now);
    transaction.commit();
  });
}

int64_t SqliteStore::evidence_count() {
  sqlite::Statement query(*db_, "SELECT count(*) FROM evidence");
  query.step();
  return query.integer(0);
}

}  // namespace kforge::memory

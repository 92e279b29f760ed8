#include "report/run_database.h"

#include "common/error.h"
#include "memory/sqlite_statement.h"

namespace kforge::report {

namespace sqlite = memory::sqlite;

struct RunDatabase::Impl {
  explicit Impl(const std::string& path) : db(path, 5000) {}
  sqlite::Database db;
};

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
  id TEXT PRIMARY KEY, idx INTEGER NOT NULL, step INTEGER NOT NULL, parent_id TEXT NOT NULL,
  direction_id TEXT NOT NULL, strategy_id TEXT NOT NULL, change TEXT NOT NULL,
  verdict TEXT NOT NULL, message TEXT NOT NULL, artifact_key TEXT NOT NULL,
  compile_s REAL NOT NULL, median_ms REAL, log_gain REAL, evaluation TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rungs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, candidate_id TEXT NOT NULL, rung TEXT NOT NULL,
  verdict TEXT NOT NULL, seconds REAL NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, step INTEGER NOT NULL, decision TEXT NOT NULL);
)sql";

std::optional<double> nullable(const sqlite::Statement& s, int value_column, int null_column) {
  if (s.integer(null_column) != 0) return std::nullopt;
  return s.real(value_column);
}

}  // namespace

RunDatabase::RunDatabase(std::filesystem::path path) : path_(std::move(path)) {}
RunDatabase::~RunDatabase() = default;

std::unique_ptr<RunDatabase> RunDatabase::open(const std::filesystem::path& path) {
  std::unique_ptr<RunDatabase> run(new RunDatabase(path));
  try {
    run->impl_ = std::make_unique<Impl>(path.string());
    sqlite::Database& db = run->impl_->db;
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    sqlite::Statement version(db, "PRAGMA user_version");
    version.step();
    const int64_t found = version.integer(0);
    if (found > kSchemaVersion) {
      throw Error("run database " + path.string() + " has schema version " +
                  std::to_string(found) + ", newer than this kforge supports (" +
                  std::to_string(kSchemaVersion) + "): resume it with a newer kforge");
    }
    if (found == 0) {
      sqlite::Statement tables(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
      tables.step();
      if (tables.integer(0) != 0) {
        throw Error(path.string() + " is an SQLite file but not a kforge run database (it has "
                    "tables and no schema version)");
      }
      sqlite::Transaction transaction(db);
      db.exec(kSchema);
      db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      transaction.commit();
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(path.string()) != std::string::npos) throw;
    throw Error("cannot open the run database " + path.string() + ": " + what);
  }
  return run;
}

void RunDatabase::set_meta(const std::string& key, const nlohmann::json& value) {
  sqlite::Statement s(impl_->db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
  s.bind(1, key).bind(2, value.dump());
  s.run();
}

std::optional<nlohmann::json> RunDatabase::meta(const std::string& key) const {
  sqlite::Statement s(impl_->db, "SELECT value FROM meta WHERE key = ?1");
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return nlohmann::json::parse(s.text(0));
}

void RunDatabase::record_candidate(const CandidateRow& row) {
  sqlite::Statement s(impl_->db,
                      "INSERT OR REPLACE INTO candidates (id, idx, step, parent_id, direction_id, "
                      "strategy_id, change, verdict, message, artifact_key, compile_s, median_ms, "
                      "log_gain, evaluation) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                      "?12, ?13, ?14)");
  s.bind(1, row.id)
      .bind(2, int64_t{row.index})
      .bind(3, int64_t{row.step})
      .bind(4, row.parent_id)
      .bind(5, row.direction_id)
      .bind(6, row.strategy_id)
      .bind(7, row.change)
      .bind(8, row.verdict)
      .bind(9, row.message)
      .bind(10, row.artifact_key)
      .bind(11, row.compile_s)
      .bind(12, row.median_ms)
      .bind(13, row.log_gain)
      .bind(14, row.evaluation.is_null() ? std::string("null") : row.evaluation.dump());
  s.run();
}

namespace {

constexpr const char* kCandidateColumns =
    "SELECT id, idx, step, parent_id, direction_id, strategy_id, change, verdict, message, "
    "artifact_key, compile_s, median_ms, median_ms IS NULL, log_gain, log_gain IS NULL, "
    "evaluation FROM candidates";

CandidateRow candidate_of(const sqlite::Statement& s) {
  CandidateRow row;
  row.id = s.text(0);
  row.index = static_cast<int>(s.integer(1));
  row.step = static_cast<int>(s.integer(2));
  row.parent_id = s.text(3);
  row.direction_id = s.text(4);
  row.strategy_id = s.text(5);
  row.change = s.text(6);
  row.verdict = s.text(7);
  row.message = s.text(8);
  row.artifact_key = s.text(9);
  row.compile_s = s.real(10);
  row.median_ms = nullable(s, 11, 12);
  row.log_gain = nullable(s, 13, 14);
  row.evaluation = nlohmann::json::parse(s.text(15));
  return row;
}

}  // namespace

std::optional<CandidateRow> RunDatabase::candidate(const std::string& id) const {
  sqlite::Statement s(impl_->db, std::string(kCandidateColumns) + " WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return candidate_of(s);
}

std::vector<CandidateRow> RunDatabase::candidates() const {
  sqlite::Statement s(impl_->db, std::string(kCandidateColumns) + " ORDER BY idx, id");
  std::vector<CandidateRow> rows;
  while (s.step()) rows.push_back(candidate_of(s));
  return rows;
}

void RunDatabase::record_rung(const RungRow& row) {
  sqlite::Statement s(impl_->db,
                      "INSERT INTO rungs (candidate_id, rung, verdict, seconds, detail) VALUES "
                      "(?1, ?2, ?3, ?4, ?5)");
  s.bind(1, row.candidate_id).bind(2, row.rung).bind(3, row.verdict).bind(4, row.seconds);
  s.bind(5, row.detail.dump());
  s.run();
}

std::vector<RungRow> RunDatabase::rungs(const std::string& candidate_id) const {
  sqlite::Statement s(impl_->db,
                      "SELECT candidate_id, rung, verdict, seconds, detail FROM rungs WHERE "
                      "candidate_id = ?1 ORDER BY seq");
  s.bind(1, candidate_id);
  std::vector<RungRow> rows;
  while (s.step()) {
    rows.push_back({s.text(0), s.text(1), s.text(2), s.real(3), nlohmann::json::parse(s.text(4))});
  }
  return rows;
}

void RunDatabase::record_decision(int step, const nlohmann::json& decision) {
  sqlite::Statement s(impl_->db, "INSERT INTO decisions (step, decision) VALUES (?1, ?2)");
  s.bind(1, int64_t{step}).bind(2, decision.dump());
  s.run();
}

std::vector<nlohmann::json> RunDatabase::decisions() const {
  sqlite::Statement s(impl_->db, "SELECT decision FROM decisions ORDER BY seq");
  std::vector<nlohmann::json> rows;
  while (s.step()) rows.push_back(nlohmann::json::parse(s.text(0)));
  return rows;
}

}  // namespace kforge::report

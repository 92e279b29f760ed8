#include "report/baseline_cache.h"

#include "common/error.h"
#include "memory/sqlite_statement.h"

namespace kforge::report {
namespace fs = std::filesystem;
namespace sqlite = memory::sqlite;

namespace {

constexpr int kSchemaVersion = 1;

// One row per key; the entry as JSON (its fields may grow without a migration).
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS baselines (
  problem_sha256 TEXT NOT NULL, dims TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL,
  torch_version TEXT NOT NULL, kind TEXT NOT NULL, measured_at TEXT NOT NULL,
  entry TEXT NOT NULL,
  PRIMARY KEY (problem_sha256, dims, backend, device, torch_version, kind));
)sql";

nlohmann::json entry_json(const BaselineEntry& e) {
  nlohmann::json j = {{"ok", e.ok},
                      {"message", e.message},
                      {"median_ms", e.median_ms},
                      {"samples_ms", e.samples_ms},
                      {"compile_s", e.compile_s},
                      {"eager_median_ms", e.eager_median_ms},
                      {"measured_at", e.measured_at},
                      {"run_dir", e.run_dir},
                      {"kforge_version", e.kforge_version}};
  j["over_eager"] = e.over_eager ? nlohmann::json(*e.over_eager) : nlohmann::json();
  return j;
}

BaselineEntry entry_from(const nlohmann::json& j) {
  BaselineEntry e;
  e.ok = j.at("ok").get<bool>();
  e.message = j.value("message", "");
  e.median_ms = j.value("median_ms", 0.0);
  e.samples_ms = j.value("samples_ms", std::vector<double>{});
  e.compile_s = j.value("compile_s", 0.0);
  e.eager_median_ms = j.value("eager_median_ms", 0.0);
  e.measured_at = j.value("measured_at", "");
  e.run_dir = j.value("run_dir", "");
  e.kforge_version = j.value("kforge_version", "");
  if (j.contains("over_eager") && !j.at("over_eager").is_null()) {
    e.over_eager = j.at("over_eager").get<evaluation::SpeedupEstimate>();
  }
  return e;
}

}  // namespace

std::string BaselineKey::describe() const {
  return to_string(kind) + " of " + problem_sha256.substr(0, 12) + " " + dims + " on " + backend +
         " " + device + " (" + torch_version + ")";
}

struct BaselineCache::Impl {
  explicit Impl(const std::string& path) : db(path, 10000) {}
  sqlite::Database db;
};

BaselineCache::BaselineCache(fs::path path) : path_(std::move(path)) {}
BaselineCache::~BaselineCache() = default;

fs::path BaselineCache::file_in(const fs::path& cache_dir) { return cache_dir / "baselines.sqlite"; }

std::unique_ptr<BaselineCache> BaselineCache::open(const fs::path& file) {
  std::unique_ptr<BaselineCache> cache(new BaselineCache(file));
  try {
    if (file.has_parent_path()) fs::create_directories(file.parent_path());
    cache->impl_ = std::make_unique<Impl>(file.string());
    sqlite::Database& db = cache->impl_->db;
    db.exec("PRAGMA journal_mode = WAL");
    sqlite::Statement version(db, "PRAGMA user_version");
    version.step();
    const int64_t found = version.integer(0);
    if (found > kSchemaVersion) {
      throw Error("schema version " + std::to_string(found) + " is newer than this kforge reads (" +
                  std::to_string(kSchemaVersion) + ")");
    }
    if (found == 0) {
      sqlite::Transaction transaction(db);
      sqlite::Statement tables(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                   "AND name != 'baselines'");
      tables.step();
      if (tables.integer(0) != 0) {
        throw Error("an SQLite file with other tables, not a kforge baseline cache");
      }
      db.exec(kSchema);
      db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      transaction.commit();
    }
  } catch (const std::exception& e) {
    throw Error("baseline cache " + file.string() + ": " + e.what() +
                " (delete it, or give another --cache-dir, to start a new one)");
  }
  return cache;
}

std::optional<BaselineEntry> BaselineCache::find(const BaselineKey& key) {
  sqlite::Statement s(impl_->db,
                      "SELECT entry FROM baselines WHERE problem_sha256 = ?1 AND dims = ?2 AND "
                      "backend = ?3 AND device = ?4 AND torch_version = ?5 AND kind = ?6");
  s.bind(1, key.problem_sha256).bind(2, key.dims).bind(3, key.backend).bind(4, key.device);
  s.bind(5, key.torch_version).bind(6, to_string(key.kind));
  if (!s.step()) return std::nullopt;
  try {
    return entry_from(nlohmann::json::parse(s.text(0)));
  } catch (const std::exception& e) {
    throw Error("baseline cache " + path_.string() + ": the entry " + key.describe() +
                " is unreadable (" + e.what() + "); --baseline-cache refresh replaces it");
  }
}

void BaselineCache::store(const BaselineKey& key, const BaselineEntry& entry) {
  sqlite::Statement s(impl_->db,
                      "INSERT OR REPLACE INTO baselines (problem_sha256, dims, backend, device, "
                      "torch_version, kind, measured_at, entry) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                      "?7, ?8)");
  s.bind(1, key.problem_sha256).bind(2, key.dims).bind(3, key.backend).bind(4, key.device);
  s.bind(5, key.torch_version).bind(6, to_string(key.kind)).bind(7, entry.measured_at);
  s.bind(8, entry_json(entry).dump());
  s.run();
}

}  // namespace kforge::report

// Schema 2 of the memory: migration from schema 1, per-lag edges, concurrent writers, locked and
// corrupt files, export/import and reset.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

#ifdef KFORGE_SOURCE_DIR
const std::filesystem::path kSeedPath =
    std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";
#else
const std::filesystem::path kSeedPath = "knowledge/seed.toml";
#endif

// A memory file as kforge with schema 1 wrote it (the DDL of migrate_to_1, verbatim): two
// directions, one strategy, one edge with statistics, and two evidence rows, one of them a
// compile error whose v1 note joined the change and the message with " | ".
constexpr const char* kVersion1File = R"sql(
PRAGMA application_id = 1801875314;
CREATE TABLE directions (id TEXT PRIMARY KEY, title TEXT NOT NULL, goal TEXT NOT NULL, triggers TEXT NOT NULL, risks TEXT NOT NULL, backends TEXT NOT NULL, prior REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT '');
CREATE TABLE strategies (id TEXT PRIMARY KEY, direction_id TEXT NOT NULL REFERENCES directions(id), title TEXT NOT NULL, edit_pattern TEXT NOT NULL, validation TEXT NOT NULL, triggers TEXT NOT NULL, edits TEXT NOT NULL, backends TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT '');
CREATE INDEX strategies_by_direction ON strategies(direction_id);
CREATE TABLE edges (from_direction TEXT NOT NULL REFERENCES directions(id), to_direction TEXT NOT NULL REFERENCES directions(id), rationale TEXT NOT NULL DEFAULT '', risks TEXT NOT NULL DEFAULT '', prior REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0, ok_attempts INTEGER NOT NULL DEFAULT 0, mean_log_gain REAL NOT NULL DEFAULT 0, ema_log_gain REAL NOT NULL DEFAULT 0, last_used TEXT NOT NULL DEFAULT '', PRIMARY KEY (from_direction, to_direction));
CREATE TABLE evidence (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, direction_id TEXT NOT NULL REFERENCES directions(id), strategy_id TEXT REFERENCES strategies(id), previous_direction_id TEXT REFERENCES directions(id), verdict TEXT NOT NULL, log_gain REAL, speedup_vs_baseline REAL, candidate_id TEXT NOT NULL, note TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL, compute_capability TEXT NOT NULL, toolchain TEXT NOT NULL, family TEXT NOT NULL, task_hash TEXT NOT NULL);
CREATE INDEX evidence_by_direction ON evidence(direction_id);
INSERT INTO directions VALUES ('memory_access', 'Memory access', 'g', '[]', '[]', '["cuda"]', 0.3, 2, 1, 1, 0.2, 0.06, '2026-01-01T00:00:01.000Z');
INSERT INTO directions VALUES ('parallel_decomposition', 'Parallel', 'g', '[]', '[]', '["cuda"]', 0.3, 0, 0, 0, 0, 0, '');
INSERT INTO strategies VALUES ('cuda_vectorized_loads', 'memory_access', 'Vec', 'e', '[]', '["memory-bound kernel"]', '[{"param":"VEC","op":"max","value":""}]', '["cuda"]', 2, 1, 1, 0.2, 0.06, '2026-01-01T00:00:01.000Z');
INSERT INTO edges VALUES ('parallel_decomposition', 'memory_access', 'why', 'risk', 0.2, 2, 1, 1, 0.2, 0.06, '2026-01-01T00:00:01.000Z');
INSERT INTO evidence VALUES (1, '2026-01-01T00:00:00.000Z', 'memory_access', 'cuda_vectorized_loads', 'parallel_decomposition', 'ok', 0.2, 1.5, 'c1', 'VEC=4', 'cuda', 'NVIDIA H200', '9.0', 'nvcc 12.8', 'rmsnorm', 't1');
INSERT INTO evidence VALUES (2, '2026-01-01T00:00:01.000Z', 'memory_access', 'cuda_vectorized_loads', 'parallel_decomposition', 'compile_error', NULL, NULL, 'c2', 'VEC=8 | nvcc: error: bad vector', 'cuda', 'NVIDIA H200', '9.0', 'nvcc 12.8', 'rmsnorm', 't1');
PRAGMA user_version = 1;
)sql";

class MemoryV2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge_memory_v2_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ / "memory.sqlite";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  void exec_raw(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  std::string bytes_of(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static Evidence attempt(const std::string& direction, const std::string& strategy,
                          std::optional<double> log_gain, std::vector<std::string> prefix = {}) {
    Evidence e;
    e.direction_id = direction;
    e.strategy_id = strategy;
    e.prefix = std::move(prefix);
    e.provenance = {"cuda", "NVIDIA H200", "9.0", "nvcc 12.8", "rmsnorm", "t1"};
    e.verdict = log_gain ? "ok" : "wrong_answer";
    e.log_gain = log_gain;
    e.candidate_id = "c";
    e.excerpt = "change";
    return e;
  }

  std::filesystem::path directory_;
  std::filesystem::path path_;
};

TEST_F(MemoryV2Test, AVersion1FileIsMigratedWithItsEvidence) {
  exec_raw(kVersion1File);
  auto store = SqliteStore::open(path_, "");
  EXPECT_EQ(store->schema_version(), SqliteStore::kSchemaVersion);
  EXPECT_TRUE(store->runs().empty());  // schema 3's recorded runs: none yet, and readable
  std::vector<Evidence> rows = store->evidence("cuda");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].prefix, std::vector<std::string>{"parallel_decomposition"});
  EXPECT_EQ(rows[0].excerpt, "VEC=4");
  EXPECT_EQ(rows[1].excerpt, "VEC=8");
  EXPECT_EQ(rows[1].failure_reason, "nvcc: error: bad vector");
  EXPECT_FALSE(rows[1].log_gain.has_value());
  // Statistics are recomputed from the rows: 2 attempts, 1 compiled, 1 correct and faster.
  std::optional<Edge> edge = store->edge("parallel_decomposition", "memory_access");
  ASSERT_TRUE(edge.has_value());
  EXPECT_DOUBLE_EQ(edge->prior, 0.2);
  EXPECT_EQ(edge->rationale, "why");
  const Stats& lag1 = edge->by_lag[0];
  EXPECT_EQ(lag1.attempts, 2);
  EXPECT_EQ(lag1.compile_successes, 1);
  EXPECT_EQ(lag1.correct_successes, 1);
  EXPECT_EQ(lag1.successes, 1);
  EXPECT_NEAR(lag1.mean_log_gain, 0.2, 1e-12);
  EXPECT_NEAR(lag1.ema_log_gain, 0.06, 1e-12);  // 0.3 * 0.2
  EXPECT_EQ(lag1.last_used, "2026-01-01T00:00:01.000Z");
  const Stats direction = store->directions("cuda")[0].stats;
  EXPECT_EQ(direction.attempts, 2);
  EXPECT_EQ(direction.compile_successes, 1);
  // The migrated file takes new evidence and opens again.
  store->record(attempt("memory_access", "cuda_vectorized_loads", 0.1, {"parallel_decomposition"}));
  store.reset();
  EXPECT_EQ(SqliteStore::open(path_, "")->evidence_count(), 3);
}

TEST_F(MemoryV2Test, ANewerSchemaIsRefusedAndTheFileLeftAlone) {
  SqliteStore::open(path_, kSeedPath).reset();
  exec_raw("PRAGMA user_version = 99");
  const std::string before = bytes_of(path_);
  try {
    SqliteStore::open(path_, kSeedPath);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path_.string()), std::string::npos) << message;
    EXPECT_NE(message.find("schema version 99 is newer than this kforge supports (" +
                           std::to_string(SqliteStore::kSchemaVersion) + ")"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(bytes_of(path_), before);
}

TEST_F(MemoryV2Test, EvidenceUpdatesEveryPrefixEdgeAtItsLag) {
  auto store = SqliteStore::open(path_, kSeedPath);
  // Chosen in order fusion, latency_hiding, reduction_algorithm, parallel_decomposition, then
  // memory_access: lag 1 is parallel_decomposition, lag 3 latency_hiding, fusion is beyond.
  store->record(attempt("memory_access", "cuda_vectorized_loads", 0.3,
                        {"parallel_decomposition", "reduction_algorithm", "latency_hiding",
                         "fusion"}));
  EXPECT_EQ(store->edge("parallel_decomposition", "memory_access")->by_lag[0].attempts, 1);
  EXPECT_EQ(store->edge("parallel_decomposition", "memory_access")->by_lag[1].attempts, 0);
  EXPECT_EQ(store->edge("reduction_algorithm", "memory_access")->by_lag[1].attempts, 1);
  EXPECT_EQ(store->edge("reduction_algorithm", "memory_access")->by_lag[0].attempts, 0);
  EXPECT_NEAR(store->edge("latency_hiding", "memory_access")->by_lag[2].mean_log_gain, 0.3,
              1e-12);
  EXPECT_FALSE(store->edge("fusion", "memory_access").has_value());
  EXPECT_EQ(store->evidence("cuda")[0].prefix.size(), 3u) << "kept up to kMaxLag";
}

TEST_F(MemoryV2Test, TwoThreadsWritingThroughTheirOwnConnectionsLoseNothing) {
  SqliteStore::open(path_, kSeedPath).reset();
  auto writer = [&](double gain) {
    auto store = SqliteStore::open(path_, kSeedPath);
    for (int i = 0; i < 40; ++i) {
      store->record(attempt("memory_access", "cuda_vectorized_loads", gain, {"fusion"}));
    }
  };
  std::thread first(writer, 0.1), second(writer, -0.1);
  first.join();
  second.join();
  auto store = SqliteStore::open(path_, kSeedPath);
  EXPECT_EQ(store->evidence_count(), 80);
  const Stats lag1 = store->edge("fusion", "memory_access")->by_lag[0];
  EXPECT_EQ(lag1.attempts, 80);
  EXPECT_EQ(lag1.successes, 40);
  EXPECT_NEAR(lag1.mean_log_gain, 0.0, 1e-12);
}

TEST_F(MemoryV2Test, TwoProcessesWritingOneFileLoseNothing) {
  SqliteStore::open(path_, kSeedPath).reset();
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        auto store = SqliteStore::open(path_, kSeedPath);
        for (int i = 0; i < 30; ++i) {
          store->record(attempt("memory_access", "cuda_vectorized_loads", 0.05 * (child + 1)));
        }
      } catch (...) {
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto store = SqliteStore::open(path_, kSeedPath);
  EXPECT_EQ(store->evidence_count(), 60);
  EXPECT_EQ(store->directions("cuda")[0].stats.attempts, 60);
  EXPECT_NEAR(store->directions("cuda")[0].stats.mean_log_gain, 0.075, 1e-12);
}

TEST_F(MemoryV2Test, ALockedFileIsAClearErrorAndNothingIsLost) {
  auto store = SqliteStore::open(path_, kSeedPath, /*busy_timeout_ms=*/100);
  store->record(attempt("memory_access", "cuda_vectorized_loads", 0.1));
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  try {
    store->record(attempt("memory_access", "cuda_vectorized_loads", 0.2));
    ADD_FAILURE() << "expected an Error while another connection holds the write lock";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path_.string()), std::string::npos) << message;
    EXPECT_NE(message.find("locked"), std::string::npos) << message;
  }
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_EQ(store->evidence_count(), 1);
  EXPECT_EQ(store->directions("cuda")[0].stats.attempts, 1);
  store->record(attempt("memory_access", "cuda_vectorized_loads", 0.2));
  EXPECT_EQ(store->evidence_count(), 2);
}

TEST_F(MemoryV2Test, ACorruptFileIsNamedAndLeftAlone) {
  std::ofstream(path_) << std::string(4096, 'x');
  const std::string before = bytes_of(path_);
  try {
    SqliteStore::open(path_, kSeedPath);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path_.string() + ": not a kforge memory database, or corrupt"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(bytes_of(path_), before);
}

TEST_F(MemoryV2Test, ExportImportMergesOnceAndRecomputesStatistics) {
  auto source = SqliteStore::open(path_, kSeedPath);
  source->record(attempt("memory_access", "cuda_vectorized_loads", 0.2, {"fusion"}));
  source->record(attempt("memory_access", "cuda_vectorized_loads", std::nullopt, {"fusion"}));
  nlohmann::json exported = source->export_json();
  EXPECT_EQ(exported["format"], "kforge-memory");
  EXPECT_EQ(exported["evidence"].size(), 2u);

  auto target = SqliteStore::open(directory_ / "other.sqlite", kSeedPath);
  target->record(attempt("memory_access", "cuda_vectorized_loads", -0.4));
  SqliteStore::ImportSummary first = target->import_json(exported, "x.json");
  EXPECT_EQ(first.evidence_added, 2);
  EXPECT_EQ(first.directions_added, 0) << "known nodes keep their own text and priors";
  SqliteStore::ImportSummary again = target->import_json(exported, "x.json");
  EXPECT_EQ(again.evidence_added, 0);
  EXPECT_EQ(again.evidence_skipped, 2);
  EXPECT_EQ(target->evidence_count(), 3);
  const Stats s = target->strategies("memory_access")[0].stats;
  EXPECT_EQ(s.attempts, 3);
  EXPECT_EQ(s.ok_attempts, 2);
  EXPECT_NEAR(s.mean_log_gain, -0.1, 1e-12);  // (-0.4 + 0.2) / 2
  EXPECT_EQ(target->edge("fusion", "memory_access")->by_lag[0].attempts, 2);
}

TEST_F(MemoryV2Test, BadImportNamesTheEntryAndChangesNothing) {
  auto store = SqliteStore::open(path_, kSeedPath);
  nlohmann::json document = store->export_json();
  document["evidence"] = nlohmann::json::array();
  Evidence good = attempt("memory_access", "cuda_vectorized_loads", 0.1);
  store->record(good);
  nlohmann::json row = store->export_json()["evidence"][0];
  row["created_at"] = "2030-01-01T00:00:00.000Z";
  document["evidence"].push_back(row);
  row["strategy"] = "no_such_strategy";
  document["evidence"].push_back(row);
  try {
    store->import_json(document, "bad.json");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: evidence[1]"), std::string::npos)
        << e.what();
    // The user's terms, not SQLite's INSERT statement and "FOREIGN KEY constraint failed".
    EXPECT_NE(std::string(e.what()).find("): unknown strategy 'no_such_strategy'"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("INSERT"), std::string::npos) << e.what();
  }
  document["evidence"][1]["strategy"] = good.strategy_id;
  document["evidence"][1]["direction"] = "no_such_direction";
  try {
    store->import_json(document, "bad.json");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("): unknown direction 'no_such_direction'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(store->evidence_count(), 1) << "the whole import is rolled back";
  document["evidence"][1].erase("verdict");
  EXPECT_THROW(store->import_json(document, "bad.json"), Error);
  EXPECT_THROW(store->import_json(nlohmann::json{{"format", "other"}}, "bad.json"), Error);
}

TEST_F(MemoryV2Test, ResetRestoresTheSeedAndDropsEvidence) {
  auto store = SqliteStore::open(path_, kSeedPath);
  store->record(attempt("memory_access", "cuda_vectorized_loads", 0.1, {"fusion"}));
  store->reset(load_knowledge(kSeedPath));
  EXPECT_EQ(store->evidence_count(), 0);
  EXPECT_EQ(store->directions("").size(), load_knowledge(kSeedPath).directions.size());
  EXPECT_EQ(store->directions("cuda")[0].stats.attempts, 0);
  EXPECT_FALSE(store->edge("fusion", "memory_access").has_value());
}

}  // namespace
}  // namespace kforge::memory

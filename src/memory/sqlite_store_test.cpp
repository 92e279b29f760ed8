#include "memory/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "common/error.h"

namespace kforge::memory {
namespace {

#ifdef KFORGE_SOURCE_DIR
const std::filesystem::path kSeedPath =
    std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";
#else
const std::filesystem::path kSeedPath = "knowledge/seed.toml";
#endif

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge_store_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ / "nested" / "dir" / "memory.sqlite";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::unique_ptr<SqliteStore> open() { return SqliteStore::open(path_, kSeedPath); }

  static Evidence attempt(const std::string& verdict, std::optional<double> log_gain,
                          const std::string& previous = "") {
    Evidence e;
    e.direction_id = "memory_access";
    e.strategy_id = "cuda_vectorized_loads";
    if (!previous.empty()) e.prefix = {previous};
    e.provenance = {"cuda", "NVIDIA H200", "9.0", "nvcc 12.8", "rmsnorm", "abc123"};
    e.verdict = verdict;
    e.log_gain = log_gain;
    e.candidate_id = "c1";
    e.excerpt = "VEC=4";
    return e;
  }

  void set_user_version(int version) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    std::string sql = "PRAGMA user_version = " + std::to_string(version);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }

  Direction direction(SqliteStore& store, const std::string& id) {
    for (Direction& d : store.directions("")) {
      if (d.id == id) return d;
    }
    ADD_FAILURE() << "no direction " << id;
    return {};
  }

  Strategy strategy(SqliteStore& store, const std::string& direction_id, const std::string& id) {
    for (Strategy& s : store.strategies(direction_id)) {
      if (s.id == id) return s;
    }
    ADD_FAILURE() << "no strategy " << id;
    return {};
  }

  std::filesystem::path directory_;
  std::filesystem::path path_;
};

TEST_F(SqliteStoreTest, OpenCreatesDirectoriesMigratesAndSeeds) {
  auto store = open();
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_EQ(store->schema_version(), SqliteStore::kSchemaVersion);
  EXPECT_EQ(store->evidence_count(), 0);
  Knowledge seed = load_knowledge(kSeedPath);
  EXPECT_EQ(store->directions("").size(), seed.directions.size());
  for (const Direction& d : store->directions("cpu")) {
    EXPECT_NE(std::find(d.backends.begin(), d.backends.end(), "cpu"), d.backends.end()) << d.id;
  }
  std::vector<Strategy> stored = store->strategies("parallel_decomposition");
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(stored[0].id, "cuda_warp_per_row");
  ASSERT_EQ(stored[0].edits.size(), 1u);
  EXPECT_EQ(stored[0].edits[0].op, "variant");
  EXPECT_EQ(stored[0].edits[0].value, "warp_per_row");
  EXPECT_EQ(stored[0].backends, std::vector<std::string>{"cuda"});
  std::optional<Edge> edge = store->edge("parallel_decomposition", "memory_access");
  ASSERT_TRUE(edge.has_value());
  EXPECT_DOUBLE_EQ(edge->prior, 0.2);
  EXPECT_FALSE(edge->rationale.empty());
  EXPECT_FALSE(store->edge("memory_access", "parallel_decomposition").has_value());
  EXPECT_TRUE(store->strategies("no_such_direction").empty());
}

TEST_F(SqliteStoreTest, RecordUpdatesDirectionStrategyAndEdgeStatistics) {
  auto store = open();
  store->record(attempt("ok", 0.2, "parallel_decomposition"));
  store->record(attempt("ok", -0.1, "parallel_decomposition"));
  store->record(attempt("compile_error", std::nullopt, "parallel_decomposition"));
  EXPECT_EQ(store->evidence_count(), 3);

  const double ema = 0.3 * 0.2 + 0.3 * (-0.1 - 0.3 * 0.2);  // 0.012
  auto check = [&](const Stats& stats, const std::string& what) {
    EXPECT_EQ(stats.attempts, 3) << what;
    EXPECT_EQ(stats.compile_successes, 2) << what;
    EXPECT_EQ(stats.correct_successes, 2) << what;
    EXPECT_EQ(stats.successes, 1) << what;
    EXPECT_EQ(stats.ok_attempts, 2) << what;
    EXPECT_NEAR(stats.mean_log_gain, 0.05, 1e-12) << what;
    EXPECT_NEAR(stats.ema_log_gain, ema, 1e-12) << what;
    EXPECT_EQ(stats.last_used.size(), 24u) << what << ": " << stats.last_used;
    EXPECT_EQ(stats.last_used.back(), 'Z') << what;
  };
  check(direction(*store, "memory_access").stats, "direction");
  check(strategy(*store, "memory_access", "cuda_vectorized_loads").stats, "strategy");
  std::optional<Edge> edge = store->edge("parallel_decomposition", "memory_access");
  ASSERT_TRUE(edge.has_value());
  check(edge->by_lag[0], "edge lag 1");
  EXPECT_EQ(edge->by_lag[1].attempts, 0) << "one-step prefixes say nothing about lag 2";
  EXPECT_DOUBLE_EQ(edge->prior, 0.2) << "recording keeps the seeded prior";
  // Untouched nodes stay untouched.
  EXPECT_EQ(direction(*store, "parallel_decomposition").stats.attempts, 0);
  EXPECT_EQ(strategy(*store, "memory_access", "cuda_coalesced_warp_rows").stats.attempts, 0);
}

TEST_F(SqliteStoreTest, RecordCreatesAnUnseenEdgeWithZeroPrior) {
  auto store = open();
  ASSERT_FALSE(store->edge("fusion", "memory_access").has_value());
  store->record(attempt("ok", 0.4, "fusion"));
  std::optional<Edge> edge = store->edge("fusion", "memory_access");
  ASSERT_TRUE(edge.has_value());
  EXPECT_EQ(edge->prior, 0.0);
  EXPECT_EQ(edge->by_lag[0].attempts, 1);
  EXPECT_EQ(edge->by_lag[0].successes, 1);
  EXPECT_NEAR(edge->by_lag[0].mean_log_gain, 0.4, 1e-12);
}

TEST_F(SqliteStoreTest, FirstStepAndDirectionOnlyEvidenceTouchNoEdgeOrStrategy) {
  auto store = open();
  Evidence evidence = attempt("ok", 0.1);
  evidence.strategy_id = "";
  store->record(evidence);
  EXPECT_EQ(direction(*store, "memory_access").stats.attempts, 1);
  EXPECT_EQ(strategy(*store, "memory_access", "cuda_vectorized_loads").stats.attempts, 0);
  EXPECT_EQ(store->evidence_count(), 1);
}

TEST_F(SqliteStoreTest, InvalidEvidenceIsRejectedAndWritesNothing) {
  auto store = open();
  Evidence unknown_direction = attempt("ok", 0.1);
  unknown_direction.direction_id = "teleportation";
  Evidence foreign_strategy = attempt("ok", 0.1);
  foreign_strategy.strategy_id = "cpu_parallel_rows";
  Evidence unknown_previous = attempt("ok", 0.1, "nowhere");
  Evidence not_finite = attempt("ok", std::numeric_limits<double>::quiet_NaN());
  for (const Evidence* e :
       {&unknown_direction, &foreign_strategy, &unknown_previous, &not_finite}) {
    EXPECT_THROW(store->record(*e), Error);
  }
  try {
    store->record(foreign_strategy);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no strategy 'cpu_parallel_rows' under direction"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(store->evidence_count(), 0);
  EXPECT_EQ(direction(*store, "memory_access").stats.attempts, 0);
  EXPECT_FALSE(store->edge("nowhere", "memory_access").has_value());
}

TEST_F(SqliteStoreTest, ReopenKeepsDataAndDoesNotReseed) {
  {
    auto store = open();
    store->record(attempt("ok", 0.3, "parallel_decomposition"));
  }
  // The graph is not empty, so a missing seed file has nothing to add and is skipped.
  auto store = SqliteStore::open(path_, directory_ / "missing.toml");
  EXPECT_EQ(store->schema_version(), SqliteStore::kSchemaVersion);
  EXPECT_EQ(store->evidence_count(), 1);
  EXPECT_EQ(direction(*store, "memory_access").stats.successes, 1);
  EXPECT_EQ(strategy(*store, "memory_access", "cuda_vectorized_loads").stats.attempts, 1);
}

TEST_F(SqliteStoreTest, ReopenAddsTheSeedNodesItLacksAndKeepsWhatItHas) {
  // A memory seeded by an older kforge: one direction, one strategy, with its own title.
  const std::filesystem::path old_seed = directory_ / "old_seed.toml";
  std::ofstream(old_seed) << R"toml(version = 1
[[directions]]
id = "memory_access"
backends = ["cuda"]
title = "Memory access (old title)"
goal = "g"
triggers = ["t"]
risks = ["r"]
prior = 0.3
[[directions.strategies]]
id = "cuda_vectorized_loads"
title = "Old title"
edit_pattern = "p"
validation = ["v"]
triggers = ["t"]
edits = [{ param = "VEC", op = "max" }]
)toml";
  {
    auto store = SqliteStore::open(path_, old_seed);
    EXPECT_EQ(store->directions("").size(), 1u);
    store->record(attempt("ok", 0.3));
  }
  const Knowledge seed = load_knowledge(kSeedPath);
  {
    auto store = open();  // this kforge's seed
    const SqliteStore::ImportSummary& added = store->seed_additions();
    EXPECT_EQ(added.directions_added, static_cast<int>(seed.directions.size()) - 1);
    EXPECT_EQ(added.strategies_added, static_cast<int>(seed.strategies.size()) - 1);
    EXPECT_EQ(added.edges_added, static_cast<int>(seed.edges.size()));
    EXPECT_EQ(store->directions("").size(), seed.directions.size());
    // What the memory had keeps its text and its evidence.
    EXPECT_EQ(direction(*store, "memory_access").title, "Memory access (old title)");
    const Strategy kept = strategy(*store, "memory_access", "cuda_vectorized_loads");
    EXPECT_EQ(kept.title, "Old title");
    EXPECT_EQ(kept.stats.attempts, 1);
    EXPECT_EQ(store->evidence_count(), 1);
    const std::string line = describe_seed_additions(*store);
    EXPECT_NE(line.find("memory " + path_.string() + ": added "), std::string::npos) << line;
    EXPECT_NE(line.find(std::to_string(added.strategies_added) + " strategies"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("its evidence is unchanged"), std::string::npos) << line;
  }
  // Nothing is missing the second time.
  auto store = open();
  EXPECT_EQ(store->seed_additions().directions_added, 0);
  EXPECT_EQ(store->seed_additions().strategies_added, 0);
  EXPECT_EQ(store->seed_additions().edges_added, 0);
  EXPECT_EQ(describe_seed_additions(*store), "");
}

TEST_F(SqliteStoreTest, NewerSchemaIsRefused) {
  open().reset();
  set_user_version(SqliteStore::kSchemaVersion + 1);
  try {
    open();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("newer than this kforge supports"), std::string::npos)
        << e.what();
  }
}

TEST_F(SqliteStoreTest, MalformedSeedLeavesTheGraphEmptyAndNamesTheFile) {
  std::filesystem::path bad = directory_ / "bad.toml";
  std::ofstream(bad) << "version = 1\n[[directions]]\nid = 3\n";
  try {
    SqliteStore::open(path_, bad);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("while seeding memory database"), std::string::npos) << message;
    EXPECT_NE(message.find(bad.string() + ":3:"), std::string::npos) << message;
    EXPECT_NE(message.find("field 'id'"), std::string::npos) << message;
  }
  auto store = open();
  EXPECT_FALSE(store->directions("cuda").empty());
}

TEST_F(SqliteStoreTest, TwoConnectionsShareOneFile) {
  auto first = open();
  auto second = open();
  first->record(attempt("ok", 0.1));
  second->record(attempt("ok", 0.3));
  EXPECT_EQ(first->evidence_count(), 2);
  EXPECT_EQ(direction(*second, "memory_access").stats.attempts, 2);
}

TEST_F(SqliteStoreTest, SqliteErrorsNameTheCallAndPath) {
  std::filesystem::create_directories(directory_ / "a_directory.sqlite");
  try {
    SqliteStore::open(directory_ / "a_directory.sqlite", kSeedPath);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("a_directory.sqlite"), std::string::npos) << message;
    EXPECT_NE(message.find("sqlite3_"), std::string::npos) << message;
  }
}

TEST(SqliteStoreInMemory, WorksWithoutAFile) {
  auto store = SqliteStore::open(":memory:", kSeedPath);
  EXPECT_FALSE(store->directions("cuda").empty());
  auto empty = SqliteStore::open(":memory:", "");
  EXPECT_TRUE(empty->directions("").empty());
}

TEST(DefaultMemoryPath, FollowsEnvironmentPrecedence) {
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  auto restore = [](const char* name, const std::optional<std::string>& value) {
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  };
  auto db = saved("KFORGE_MEMORY_DB"), xdg = saved("XDG_DATA_HOME"), home = saved("HOME");
  auto memory = saved("KFORGE_MEMORY");
  setenv("KFORGE_MEMORY", "/new/m.sqlite", 1);
  setenv("KFORGE_MEMORY_DB", "/x/m.sqlite", 1);
  setenv("XDG_DATA_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_memory_path(), "/new/m.sqlite");
  unsetenv("KFORGE_MEMORY");
  EXPECT_EQ(default_memory_path(), "/x/m.sqlite") << "the pre-schema-2 name still works";
  unsetenv("KFORGE_MEMORY_DB");
  EXPECT_EQ(default_memory_path(), "/xdg/kforge/memory.sqlite");
  setenv("XDG_DATA_HOME", "", 1);
  EXPECT_EQ(default_memory_path(), "/home/u/.local/share/kforge/memory.sqlite");
  unsetenv("HOME");
  unsetenv("XDG_DATA_HOME");
  EXPECT_THROW(default_memory_path(), Error);
  restore("KFORGE_MEMORY_DB", db);
  restore("KFORGE_MEMORY", memory);
  restore("XDG_DATA_HOME", xdg);
  restore("HOME", home);
}

}  // namespace
}  // namespace kforge::memory

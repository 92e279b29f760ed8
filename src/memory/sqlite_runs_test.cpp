// Recorded runs in the memory (recorded_run.h, sqlite_runs.cpp): what `kforge eval --record`
// writes, read back whole, kept apart from the HTG's statistics, exported, imported once and
// deleted by a reset.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

const std::filesystem::path kSeedPath =
    std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";

class MemoryRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge_runs_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::unique_ptr<SqliteStore> open(const std::string& name = "memory.sqlite") {
    return SqliteStore::open(directory_ / name, kSeedPath);
  }

  static RecordedRun eval_run(const std::string& task_hash, const std::string& verdict) {
    RecordedRun run;
    run.kind = "eval";
    run.task = "softmax_small";
    run.command = "kforge eval task.toml mine.cpp --backend cpu";
    run.provenance = {"cpu", "Some CPU", "", "g++ 12.2.0", "softmax", task_hash};
    RecordedCandidate c;
    c.candidate_id = "key1";
    c.source_name = "/home/me/mine.cpp";
    c.source = "extern \"C\" int kforge_run() { return 0; }\n";
    c.verdict = verdict;
    if (verdict == "ok") {
      c.median_ms = 0.5;
      c.reference_median_ms = 1.0;
      c.speedup = 2.0;
      c.ci_low = 1.9;
      c.ci_high = 2.1;
      c.level = 0.95;
    } else {
      c.message = "output 'y': element [3] is 0";
      c.failed_at = "rungs 0-1";
    }
    run.candidates.push_back(c);
    return run;
  }

  std::filesystem::path directory_;
};

TEST_F(MemoryRunsTest, ARecordedRunIsReadBackWholeAndChangesNoStatistic) {
  auto store = open();
  const nlohmann::json graph_before = store->export_json();
  const int64_t id = store->record_run(eval_run("hash-a", "ok"));
  EXPECT_EQ(store->record_run(eval_run("hash-b", "wrong_answer")), id + 1);

  const std::vector<RecordedRun> runs = store->runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, id);
  EXPECT_FALSE(runs[0].created_at.empty());
  EXPECT_EQ(runs[0].kind, "eval");
  EXPECT_EQ(runs[0].provenance.family, "softmax");
  ASSERT_EQ(runs[0].candidates.size(), 1u);
  const RecordedCandidate& ok = runs[0].candidates[0];
  EXPECT_EQ(ok.source, eval_run("", "ok").candidates[0].source);
  EXPECT_EQ(ok.speedup, 2.0);
  EXPECT_EQ(ok.ci_low, 1.9);
  EXPECT_EQ(ok.level, 0.95);
  const RecordedCandidate& wrong = runs[1].candidates[0];
  EXPECT_EQ(wrong.verdict, "wrong_answer");
  EXPECT_EQ(wrong.failed_at, "rungs 0-1");
  EXPECT_FALSE(wrong.median_ms.has_value());
  EXPECT_FALSE(wrong.speedup.has_value());

  ASSERT_EQ(store->runs("hash-b").size(), 1u);
  EXPECT_EQ(store->runs("hash-b")[0].candidates[0].verdict, "wrong_answer");
  EXPECT_TRUE(store->runs("hash-c").empty());
  // Not evidence: the graph's nodes, edges and evidence are as they were.
  EXPECT_EQ(store->evidence_count(), 0);
  nlohmann::json graph_after = store->export_json();
  graph_after.erase("runs");
  nlohmann::json graph = graph_before;
  graph.erase("runs");
  EXPECT_EQ(graph_after, graph);
}

TEST_F(MemoryRunsTest, ARunWithoutACandidateOrWithANonFiniteNumberIsRefusedWhole) {
  auto store = open();
  RecordedRun empty = eval_run("h", "ok");
  empty.candidates.clear();
  EXPECT_THROW(store->record_run(empty), Error);
  RecordedRun infinite = eval_run("h", "ok");
  infinite.candidates[0].speedup = std::numeric_limits<double>::infinity();
  try {
    store->record_run(infinite);
    ADD_FAILURE() << "a non-finite speedup was recorded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("speedup must be finite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("memory.sqlite"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store->runs().empty()) << "the run row stayed without its candidate";
}

TEST_F(MemoryRunsTest, RunsTravelInExportsAndAreImportedOnce) {
  auto source = open("source.sqlite");
  source->record_run(eval_run("hash-a", "ok"));
  const nlohmann::json document = source->export_json();
  ASSERT_EQ(document["runs"].size(), 1u);

  auto target = open("target.sqlite");
  SqliteStore::ImportSummary first = target->import_json(document, "export.json");
  EXPECT_EQ(first.runs_added, 1);
  SqliteStore::ImportSummary second = target->import_json(document, "export.json");
  EXPECT_EQ(second.runs_added, 0);
  EXPECT_EQ(second.runs_skipped, 1);
  ASSERT_EQ(target->runs().size(), 1u);
  EXPECT_EQ(target->runs()[0].created_at, source->runs()[0].created_at);
  EXPECT_EQ(target->runs()[0].candidates[0].speedup, 2.0);

  // An export from before schema 3 has no "runs": still imported.
  nlohmann::json older = document;
  older.erase("runs");
  EXPECT_EQ(open("older.sqlite")->import_json(older, "old.json").runs_added, 0);
}

TEST_F(MemoryRunsTest, ResetDeletesRecordedRuns) {
  auto store = open();
  store->record_run(eval_run("hash-a", "ok"));
  store->reset(load_knowledge(kSeedPath));
  EXPECT_TRUE(store->runs().empty());
}

TEST_F(MemoryRunsTest, AWritableMemoryPassesTheCheckAndKeepsNothingOfIt) {
  auto store = open();
  EXPECT_NO_THROW(store->check_writable());
  EXPECT_TRUE(store->runs().empty());
  EXPECT_NO_THROW(store->record_run(eval_run("h", "ok")));  // the probe left no lock behind
}

}  // namespace
}  // namespace kforge::memory

// A Slurm suite's memory: snapshots carry where they end, and a merge brings back only the rows
// the job wrote after its snapshot, once, however often it is repeated.
#include "executor/job_memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "memory/sqlite_statement.h"
#include "memory/sqlite_store.h"

namespace kforge::executor {
namespace {
namespace fs = std::filesystem;
using memory::SqliteStore;

const fs::path kSeedPath = fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";

class JobMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge_job_memory_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    suite_ = dir_ / "suite.sqlite";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Records `count` evidence rows of task `task` into `memory` (as kforge optimize would).
  static void record(const fs::path& memory, const std::string& task, int count) {
    auto store = SqliteStore::open(memory, "");
    for (int i = 0; i < count; ++i) {
      memory::Evidence e;
      e.direction_id = "memory_access";
      e.provenance = {"cpu", "host", "", "g++ 12", "softmax", "hash-" + task};
      e.verdict = "ok";
      e.log_gain = 0.1 * (i + 1);
      e.candidate_id = task + "-" + std::to_string(i);
      store->record(e);
    }
  }

  static memory::RecordedRun eval_run(const std::string& task) {
    memory::RecordedRun run;
    run.kind = "eval";
    run.task = task;
    run.command = "kforge eval " + task;
    run.provenance = {"cpu", "host", "", "g++ 12", "softmax", "hash-" + task};
    memory::RecordedCandidate c;
    c.candidate_id = task + "-eval";
    c.source_name = "mine.cpp";
    c.source = "int main() {}\n";
    c.verdict = "ok";
    run.candidates.push_back(c);
    return run;
  }

  int64_t suite_evidence() { return SqliteStore::open(suite_, kSeedPath)->evidence_count(); }
  int64_t direction_attempts() {
    for (const memory::Direction& d : SqliteStore::open(suite_, kSeedPath)->directions("")) {
      if (d.id == "memory_access") return d.stats.attempts;
    }
    return -1;
  }

  fs::path dir_;
  fs::path suite_;
};

TEST_F(JobMemoryTest, ASnapshotIsMarkedWhereItEnds) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 3);
  SqliteStore::open(suite_, "")->record_run(eval_run("earlier"));
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  const auto mark = SqliteStore::open(dir_ / "job.sqlite", "")->snapshot_mark();
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(mark->evidence_id, 3);
  EXPECT_EQ(mark->run_id, 1);
  EXPECT_FALSE(SqliteStore::open(suite_, "")->snapshot_mark()) << "the suite's file is unmarked";
}

TEST_F(JobMemoryTest, RowsOfTheSnapshotAreNotEvenExported) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 5);
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  record(dir_ / "job.sqlite", "mine", 2);
  SqliteStore::open(dir_ / "job.sqlite", "")->record_run(eval_run("mine"));

  auto job = SqliteStore::open(dir_ / "job.sqlite", "");
  const nlohmann::json rows = job->export_json(*job->snapshot_mark());
  EXPECT_EQ(rows.at("evidence").size(), 2u);
  EXPECT_EQ(rows.at("runs").size(), 1u);
  EXPECT_FALSE(rows.at("directions").empty()) << "nodes go whole: import adds the missing ones";

  const MemoryMerge merged = merge_memory(dir_ / "job.sqlite", suite_, kSeedPath);
  EXPECT_TRUE(merged.past_mark_only);
  EXPECT_EQ(merged.evidence_added, 2);
  EXPECT_EQ(merged.evidence_skipped, 0) << "the snapshot's 5 rows were never read back";
  EXPECT_EQ(merged.runs_added, 1);
  EXPECT_EQ(suite_evidence(), 7);
  EXPECT_EQ(direction_attempts(), 7) << "statistics are recomputed from all evidence";
}

TEST_F(JobMemoryTest, ARepeatedMergeAddsNothing) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 2);
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  record(dir_ / "job.sqlite", "mine", 3);
  EXPECT_EQ(merge_memory(dir_ / "job.sqlite", suite_, kSeedPath).evidence_added, 3);
  const MemoryMerge again = merge_memory(dir_ / "job.sqlite", suite_, kSeedPath);
  EXPECT_EQ(again.evidence_added, 0);
  EXPECT_EQ(again.evidence_skipped, 3);
  EXPECT_EQ(suite_evidence(), 5);
  EXPECT_EQ(direction_attempts(), 5);
}

TEST_F(JobMemoryTest, AJobThatAddedNothingMergesNothing) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 4);
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  const MemoryMerge merged = merge_memory(dir_ / "job.sqlite", suite_, kSeedPath);
  EXPECT_EQ(merged.evidence_added, 0);
  EXPECT_EQ(merged.evidence_skipped, 0);
  EXPECT_EQ(suite_evidence(), 4);
}

TEST_F(JobMemoryTest, TwoJobsFromTheSameSnapshotBothLandExactlyOnce) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 2);
  snapshot_memory(suite_, kSeedPath, dir_ / "a.sqlite");
  snapshot_memory(suite_, kSeedPath, dir_ / "b.sqlite");
  record(dir_ / "a.sqlite", "a", 3);
  record(dir_ / "b.sqlite", "b", 4);  // the same ids as a's rows, in its own file
  EXPECT_EQ(merge_memory(dir_ / "a.sqlite", suite_, kSeedPath).evidence_added, 3);
  EXPECT_EQ(merge_memory(dir_ / "b.sqlite", suite_, kSeedPath).evidence_added, 4);
  EXPECT_EQ(merge_memory(dir_ / "a.sqlite", suite_, kSeedPath).evidence_added, 0);
  EXPECT_EQ(suite_evidence(), 9);
  EXPECT_EQ(direction_attempts(), 9);
}

TEST_F(JobMemoryTest, ASnapshotOfASnapshotIsMarkedAnew) {
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 2);
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  record(dir_ / "job.sqlite", "mine", 3);
  snapshot_memory(dir_ / "job.sqlite", "", dir_ / "again.sqlite");
  EXPECT_EQ(SqliteStore::open(dir_ / "again.sqlite", "")->snapshot_mark()->evidence_id, 5);
}

TEST_F(JobMemoryTest, AnUnmarkedJobFileIsMergedWholeWithItsDuplicatesSkipped) {
  // A job memory from a kforge before marks: a plain copy of the suite's memory.
  SqliteStore::open(suite_, kSeedPath);
  record(suite_, "earlier", 3);
  fs::copy_file(suite_, dir_ / "job.sqlite");
  record(dir_ / "job.sqlite", "mine", 2);
  const MemoryMerge merged = merge_memory(dir_ / "job.sqlite", suite_, kSeedPath);
  EXPECT_FALSE(merged.past_mark_only);
  EXPECT_EQ(merged.evidence_added, 2);
  EXPECT_EQ(merged.evidence_skipped, 3);
  EXPECT_EQ(suite_evidence(), 5);
}

TEST_F(JobMemoryTest, AMalformedMarkIsAnErrorNamingTheFile) {
  SqliteStore::open(suite_, kSeedPath);
  snapshot_memory(suite_, kSeedPath, dir_ / "job.sqlite");
  {
    memory::sqlite::Database db((dir_ / "job.sqlite").string(), 1000);
    db.exec("INSERT INTO snapshot_mark VALUES (1, 1)");
  }
  try {
    merge_memory(dir_ / "job.sqlite", suite_, kSeedPath);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((dir_ / "job.sqlite").string()), std::string::npos) << message;
    EXPECT_NE(message.find("expected one row"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace kforge::executor

#include "report/run_database.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "memory/sqlite_statement.h"

namespace kforge::report {
namespace {
namespace fs = std::filesystem;

class RunDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_rundb_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

CandidateRow row(const std::string& id, int index, std::optional<double> median) {
  CandidateRow r;
  r.id = id;
  r.index = index;
  r.step = index / 3;
  r.verdict = median ? "ok" : "wrong_answer";
  r.median_ms = median;
  r.evaluation = {{"rungs", nlohmann::json::array({{{"rung", "gate"}}})}};
  return r;
}

TEST_F(RunDatabaseTest, WhatIsWrittenIsReadBackAfterReopening) {
  {
    auto db = RunDatabase::open(dir_ / "run.sqlite");
    db->set_meta("seed", 42);
    db->set_meta("task", {{"name", "softmax"}});
    db->record_candidate(row("b", 1, 2.5));
    db->record_candidate(row("a", 0, std::nullopt));
    db->record_rung({"b", "gate", "ok", 0.5, {{"cases", 7}}});
    db->record_rung({"b", "quick", "ok", 1.5, {{"median_ms", 2.5}}});
    db->record_decision(1, {{"direction", "memory_access"}});
  }
  auto db = RunDatabase::open(dir_ / "run.sqlite");
  EXPECT_EQ(db->meta("seed"), nlohmann::json(42));
  EXPECT_EQ((*db->meta("task"))["name"], "softmax");
  EXPECT_FALSE(db->meta("absent"));
  const auto all = db->candidates();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "a");  // by index
  EXPECT_FALSE(all[0].median_ms);
  EXPECT_EQ(all[1].median_ms, 2.5);
  EXPECT_EQ(all[1].evaluation["rungs"][0]["rung"], "gate");
  const auto rungs = db->rungs("b");
  ASSERT_EQ(rungs.size(), 2u);
  EXPECT_EQ(rungs[1].rung, "quick");
  EXPECT_EQ(rungs[1].detail["median_ms"], 2.5);
  EXPECT_EQ(db->decisions().size(), 1u);
  // Upsert: a candidate recorded again replaces its row.
  db->record_candidate(row("b", 1, 2.0));
  EXPECT_EQ(db->candidate("b")->median_ms, 2.0);
  EXPECT_EQ(db->candidates().size(), 2u);
}

TEST_F(RunDatabaseTest, AKilledWriterLosesNothingCommitted) {
  const fs::path path = dir_ / "run.sqlite";
  RunDatabase::open(path);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto db = RunDatabase::open(path);
    for (int i = 0; i < 50; ++i) db->record_candidate(row("c" + std::to_string(i), i, i + 1.0));
    kill(getpid(), SIGKILL);  // no destructors, no checkpoint
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto db = RunDatabase::open(path);
  EXPECT_EQ(db->candidates().size(), 50u);
}

TEST_F(RunDatabaseTest, ForeignOrNewerFilesAreRefusedByName) {
  {
    memory::sqlite::Database other((dir_ / "other.sqlite").string(), 1000);
    other.exec("CREATE TABLE t (x INTEGER)");
  }
  try {
    RunDatabase::open(dir_ / "other.sqlite");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a kforge run database"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("other.sqlite"), std::string::npos);
  }
  {
    RunDatabase::open(dir_ / "newer.sqlite");
    memory::sqlite::Database raw((dir_ / "newer.sqlite").string(), 1000);
    raw.exec("PRAGMA user_version = 99");
  }
  try {
    RunDatabase::open(dir_ / "newer.sqlite");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99, newer"), std::string::npos)
        << e.what();
  }
  std::ofstream(dir_ / "garbage.sqlite") << "this is not a database at all, just text\n";
  EXPECT_THROW(
      {
        auto db = RunDatabase::open(dir_ / "garbage.sqlite");
        db->candidates();
      },
      Error);
}

}  // namespace
}  // namespace kforge::report

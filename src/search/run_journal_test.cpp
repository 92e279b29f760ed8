#include "search/run_journal.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"

namespace kforge::search {
namespace {
namespace fs = std::filesystem;

class RunJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_journal_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path() const { return dir_ / "run.sqlite"; }

  // One of every replayed kind, as a session writes them.
  static void record_everything(RunJournal& journal) {
    report::CandidateRow row;
    row.id = "a";
    row.verdict = "ok";
    row.median_ms = 2.0;
    journal.record_candidate(row);
    journal.record_rung("a", Rung::gate, Verdict::ok, 0.5, {});
    journal.record_rung("a", Rung::quick, Verdict::ok, 0.25, {});
    journal.record_rung("a", Rung::full, Verdict::ok, 4.0, {});
    journal.record_rung("a", Rung::final, Verdict::ok, 8.0, {});
    AcceptanceDecision acceptance{"b", "a", ComparisonOutcome::faster, 1.5, 1.4, 1.6, "", {}, ""};
    journal.record_comparison(acceptance, 0.125);
    journal.record_acceptance(1, acceptance);
    journal.record_plan({1, {{"b", "memory", "vector", "a", "why"}}, "rng-state"});
    journal.record_promotion(
        1, {"a", PromotionOutcome::promoted, 3.0, 1, 1, 2, 3.0, Fidelity::ladder, "top"});
    journal.record_full_rung(1, {"a", Verdict::ok, "", 9.5, {{"big", 9.5}}});
    journal.record_evidence(1, 0, "a", "memory", "vector");
    journal.record_reference({20.0, 1e11, 0.0});
    journal.set_meta("spent", {{"wall_s", 12.0}, {"cost_usd", 0.5}});
  }

  fs::path dir_;
};

TEST_F(RunJournalTest, AFreshRunAnswersNotRecordedEvenToWhatItRecorded) {
  RunJournal journal(path(), false);
  record_everything(journal);
  const ReplayJournal& replay = journal.replay();
  EXPECT_EQ(replay.candidate("a"), nullptr);
  EXPECT_FALSE(replay.plan(1));
  EXPECT_FALSE(replay.acceptance("a"));
  EXPECT_FALSE(replay.promotion("a"));
  EXPECT_FALSE(replay.full_rung("a"));
  EXPECT_FALSE(replay.evidence_written(1, 0));
  EXPECT_FALSE(replay.reference());
  EXPECT_EQ(replay.spent().wall_s, 0.0);
}

TEST_F(RunJournalTest, AResumedRunAnswersWhatEarlierSessionsRecorded) {
  {
    RunJournal first(path(), false);
    record_everything(first);
  }
  RunJournal journal(path(), true);
  const ReplayJournal& replay = journal.replay();
  const RecordedCandidate* a = replay.candidate("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->row.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(a->device_s, 0.5 + 0.25 + 0.125);  // gate, quick, compare; not full, final
  EXPECT_TRUE(a->reached_quick);
  EXPECT_EQ(replay.candidate("b"), nullptr);
  ASSERT_TRUE(replay.plan(1));
  EXPECT_EQ(replay.plan(1)->moves.at(0).candidate_id, "a");
  EXPECT_EQ(replay.plan(1)->rng, "rng-state");
  EXPECT_FALSE(replay.plan(2));
  ASSERT_TRUE(replay.acceptance("a"));
  EXPECT_EQ(replay.acceptance("a")->outcome, ComparisonOutcome::faster);
  EXPECT_EQ(replay.acceptance("a")->incumbent, "b");
  ASSERT_TRUE(replay.promotion("a"));
  EXPECT_EQ(replay.promotion("a")->outcome, PromotionOutcome::promoted);
  EXPECT_EQ(replay.promotion("a")->reason, "top");
  ASSERT_TRUE(replay.full_rung("a"));
  EXPECT_EQ(replay.full_rung("a")->decision.geomean_speedup, 9.5);
  EXPECT_EQ(replay.full_rung("a")->seconds, 4.0);
  EXPECT_TRUE(replay.evidence_written(1, 0));
  EXPECT_FALSE(replay.evidence_written(1, 1));
  ASSERT_TRUE(replay.reference());
  EXPECT_EQ(replay.reference()->quick_median_ms, 20.0);
  EXPECT_EQ(replay.spent().wall_s, 12.0);
  EXPECT_EQ(replay.spent().cost_usd, 0.5);
}

// The rows are the ones runs have always written: same kinds, keys, fields and strings.
TEST_F(RunJournalTest, DecisionsKeepTheirRecordedShape) {
  {
    RunJournal journal(path(), false);
    record_everything(journal);
    AcceptanceDecision failed{"b", "c", ComparisonOutcome::failed, 0,           0,
                              0,   "c", Verdict::wrong_answer,     "bad output"};
    journal.record_acceptance(2, failed);
    // Written once: a second decision with the same kind and key is dropped.
    journal.record_acceptance(2, {"b", "c", ComparisonOutcome::tie, 1, 1, 1, "", {}, ""});
  }
  auto db = report::RunDatabase::open(path());
  std::map<std::string, nlohmann::json> by_id;
  for (nlohmann::json& d : db->decisions())
    by_id[d["kind"].get<std::string>() + "|" + d["key"].get<std::string>()] = d;
  EXPECT_EQ(by_id.size(), 6u);
  EXPECT_EQ(by_id.at("plan|step:1"),
            nlohmann::json::parse(R"({"kind":"plan","key":"step:1","step":1,"rng":"rng-state",
              "moves":[{"parent":"b","direction":"memory","strategy":"vector","candidate":"a",
                        "explanation":"why"}]})"));
  EXPECT_EQ(by_id.at("acceptance|a"),
            nlohmann::json::parse(R"({"kind":"acceptance","key":"a","incumbent":"b",
              "challenger":"a","outcome":"faster","speedup":1.5,"ci_low":1.4,"ci_high":1.6})"));
  EXPECT_EQ(by_id.at("acceptance|c"),
            nlohmann::json::parse(R"({"kind":"acceptance","key":"c","incumbent":"b",
              "challenger":"c","outcome":"failed","speedup":0.0,"ci_low":0.0,"ci_high":0.0,
              "failed":"c","verdict":"wrong_answer","message":"bad output"})"));
  EXPECT_EQ(by_id.at("promotion|a"),
            nlohmann::json::parse(R"({"kind":"promotion","key":"a","candidate":"a",
              "outcome":"promoted","score":3.0,"rank":1,"quota":1,"cohort":2,"eta":3.0,
              "fidelity":"ladder","reason":"top"})"));
  EXPECT_EQ(by_id.at("full_rung|a"),
            nlohmann::json::parse(R"({"kind":"full_rung","key":"a","candidate":"a",
              "verdict":"ok","message":"","geomean_speedup":9.5,
              "workload_speedups":[{"workload":"big","speedup":9.5}]})"));
  EXPECT_EQ(by_id.at("evidence|step:1:0"),
            nlohmann::json::parse(R"({"kind":"evidence","key":"step:1:0","candidate":"a",
              "direction":"memory","strategy":"vector"})"));
  std::vector<std::string> rungs;
  for (const report::RungRow& r : db->rungs("a")) rungs.push_back(r.rung + ":" + r.verdict);
  EXPECT_EQ(rungs, (std::vector<std::string>{"gate:ok", "quick:ok", "full:ok", "final:ok",
                                             "compare:faster"}));
  EXPECT_EQ(db->meta("reference"),
            nlohmann::json::parse(
                R"({"quick_median_ms":20.0,"copy_bytes_per_s":1e11,"peak_flops_per_s":0.0})"));
}

TEST_F(RunJournalTest, ARecordedDecisionThatDoesNotParseNamesItsKindAndKey) {
  {
    RunJournal journal(path(), false);
    journal.decide(1, "promotion", "a", {{"candidate", "a"}, {"outcome", "promoted!"}});
  }
  RunJournal journal(path(), true);
  try {
    journal.replay().promotion("a");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decision promotion 'a'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'promoted!'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::search

// The optimizer's side of the run database (report/run_database.h): what it writes as each
// thing happens (RunJournal), and what a resumed run reads back instead of measuring or choosing
// again (ReplayJournal).
//
// Decisions are JSON objects with a "kind" and a "key" (unique per kind within a run), e.g.
//   plan         key "step:3"      the moves the policy chose for a step, and the rng state after
//   acceptance   key <challenger>  a paired comparison with the best: faster / slower / tie /
//                                  failed
//   outcome      key <candidate>   accepted (new best), not_better (correct, not faster beyond
//                                  noise) or rejected (failed the gate or the quick rung)
//   promotion    key <candidate>   promoted to rung 2 or pruned by successive halving, with the
//                                  score S(p, 1), its rank, the quota and why (scheduler.h)
//   evidence     key "step:3:1"    the memory evidence of one move was written to the store
//   full_rung    key <candidate>   rung 2's geomean speedup (or failure) of one candidate
//   final_challenge key <challenger>  a rung-2 candidate whose geomean beat the search's best,
//                                  timed paired and interleaved with it before it may replace it
//   full_choice  key <ids>         which candidate the final rung takes, and why
//   stopped      key <reason>      what stopped the search
// The replayed kinds are typed in decisions.h. A decision is written only when none with its
// kind and key exists, so a resumed run that replays the same sequence writes each decision
// once: the decision list of an interrupted and resumed run equals the one of an uninterrupted
// run with the same seed.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "core/ladder.h"
#include "core/verdict.h"
#include "report/run_database.h"
#include "search/budget.h"
#include "search/decisions.h"

namespace kforge::search {

/// A candidate as an earlier session recorded it: its row and what its rung rows add up to.
struct RecordedCandidate {
  report::CandidateRow row;
  /// Seconds the candidate worker spent on it during the search: its recorded rungs other than
  /// rung 2 and the final rung (the gate, the quick rung, acceptance comparisons), summed.
  double device_s = 0.0;
  bool reached_quick = false;  // a quick rung is recorded (rung 1 reached)
};

/// Rung 2 of a candidate as an earlier session recorded it: the decision, and the seconds of its
/// rung rows (what the budget counts again).
struct RecordedFullRung {
  FullRungDecision decision;
  double seconds = 0.0;
};

/// What the earlier sessions of a run recorded, asked by the optimizer's decision sites instead
/// of measuring or choosing again (optimizer.h, "Resume"). One question per kind of decision;
/// each answers the recorded decision or "not recorded" (null, nullopt, false). A fresh run's
/// journal answers "not recorded" to every question: nothing a session records is replayed to
/// that same session. A recorded decision that does not parse throws Error naming its kind and
/// key.
class ReplayJournal {
 public:
  /// A fresh run's: nothing recorded.
  ReplayJournal() = default;
  /// What `database` records now (at the start of a resumed session).
  explicit ReplayJournal(const report::RunDatabase& database);

  /// Candidate `id`'s recorded row, or null.
  const RecordedCandidate* candidate(const std::string& id) const;
  /// The plan of step `step`.
  std::optional<PlanDecision> plan(int step) const;
  /// The acceptance comparison of challenger `challenger` with the best of its moment.
  std::optional<AcceptanceDecision> acceptance(const std::string& challenger) const;
  /// The paired comparison of rung-2 challenger `challenger` with the search's best.
  std::optional<AcceptanceDecision> final_challenge(const std::string& challenger) const;
  /// The promotion decision on candidate `candidate`.
  std::optional<PromotionDecision> promotion(const std::string& candidate) const;
  /// Rung 2's result for candidate `candidate`.
  std::optional<RecordedFullRung> full_rung(const std::string& candidate) const;
  /// Whether the memory evidence of move `slot` of step `step` was written.
  bool evidence_written(int step, size_t slot) const;
  /// The reference's recorded numbers (meta "reference").
  std::optional<ReferenceTiming> reference() const;
  /// The wall time and LLM cost earlier sessions spent (meta "spent"; zero when not recorded).
  BudgetSpend spent() const { return spent_; }

 private:
  std::optional<nlohmann::json> decision(const std::string& kind, const std::string& key) const;

  std::map<std::string, RecordedCandidate> candidates_;
  std::map<std::string, nlohmann::json> decisions_;  // "kind|key" -> decision
  std::map<std::string, double> full_rung_s_;        // candidate -> seconds of its rung-2 rows
  std::optional<nlohmann::json> reference_;
  BudgetSpend spent_;
};

/// Writes one run's rows and decisions to its run database as they happen.
class RunJournal {
 public:
  /// Opens (or creates) `path`. With `resume`, replay() answers what earlier sessions recorded;
  /// without, nothing. Errors are RunDatabase::open's (they name the file).
  RunJournal(const std::filesystem::path& path, bool resume);

  /// The replay questions (see ReplayJournal).
  const ReplayJournal& replay() const { return replay_; }
  report::RunDatabase& database() { return *db_; }

  void set_meta(const std::string& key, const nlohmann::json& value) { db_->set_meta(key, value); }
  std::optional<nlohmann::json> meta(const std::string& key) const { return db_->meta(key); }

  /// Writes (or replaces) candidate `row.id`'s row.
  void record_candidate(const report::CandidateRow& row);
  /// Gives candidate `id`'s row `verdict` and `message` (a checked call of a later rung failed);
  /// nothing when it has no row.
  void reject_candidate(const std::string& id, Verdict verdict, const std::string& message);
  /// A rung row of candidate `id`, named to_string(rung).
  void record_rung(const std::string& id, Rung rung, Verdict verdict, double seconds,
                   const nlohmann::json& detail);
  /// The rung row of an acceptance comparison (named "compare", its verdict column holding the
  /// outcome, its detail the decision) that took `seconds`, on the challenger's rows.
  void record_comparison(const AcceptanceDecision& decision, double seconds);

  /// The replayed decisions (ReplayJournal's kinds), written once each.
  void record_plan(const PlanDecision& plan);
  void record_acceptance(int step, const AcceptanceDecision& decision);
  void record_final_challenge(int step, const AcceptanceDecision& decision);
  void record_promotion(int step, const PromotionDecision& decision);
  void record_full_rung(int step, const FullRungDecision& decision);
  void record_evidence(int step, size_t slot, const std::string& candidate,
                       const std::string& direction, const std::string& strategy);
  void record_reference(const ReferenceTiming& reference) { set_meta("reference", reference); }

  /// Records a decision that is not replayed ("outcome", "full_choice", "stopped"), its "kind"
  /// and "key" set here, unless one with the same kind and key exists; returns whether it was
  /// written.
  bool decide(int step, const std::string& kind, const std::string& key, nlohmann::json decision);

 private:
  std::unique_ptr<report::RunDatabase> db_;
  ReplayJournal replay_;
  std::map<std::string, report::CandidateRow> rows_;  // every row, this session's included
  std::set<std::string> decided_;                     // "kind|key" of every decision recorded
};

}  // namespace kforge::search

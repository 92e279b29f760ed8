// The optimizer's side of the run database (report/run_database.h): what it writes as each
// thing happens, and what a resumed run reads back instead of measuring again.
//
// Decisions are JSON objects with a "kind" and a "key" (unique per kind within a run), e.g.
//   plan         key "step:3"      the moves the policy chose for a step, and the rng state after
//   acceptance   key <challenger>  a paired comparison with the best: faster / slower / tie
//   outcome      key <candidate>   accepted (new best), not_better (correct, not faster beyond
//                                  noise) or rejected (failed the gate or the quick rung)
//   promotion    key <candidate>   promoted to rung 2 or pruned by successive halving, with the
//                                  score S(p, 1), its rank, the quota and why (scheduler.h)
//   evidence     key "step:3:1"    the memory evidence of one move was written to the store
//   full_rung    key <candidate>   rung 2's geomean speedup (or failure) of one candidate
//   full_choice  key <ids>         which candidate the final rung takes, and why
//   stopped      key <reason>      what stopped the search
// decide() writes a decision only when none with its kind and key exists, so a resumed run that
// replays the same sequence writes each decision once: the decision list of an interrupted and
// resumed run equals the one of an uninterrupted run with the same seed.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "report/run_database.h"

namespace kforge::search {

class RunJournal {
 public:
  /// Opens (or creates) `path`. With `resume`, reads back every candidate and decision already
  /// recorded. Errors are RunDatabase::open's (they name the file).
  RunJournal(const std::filesystem::path& path, bool resume);

  bool resuming() const { return resume_; }
  report::RunDatabase& database() { return *db_; }

  void set_meta(const std::string& key, const nlohmann::json& value) { db_->set_meta(key, value); }
  std::optional<nlohmann::json> meta(const std::string& key) const { return db_->meta(key); }

  /// The recorded row of candidate `id`, or null (always null on a fresh run).
  const report::CandidateRow* recorded_candidate(const std::string& id) const;
  void record_candidate(const report::CandidateRow& row);
  void record_rung(const report::RungRow& row);
  /// Seconds the candidate worker spent on `candidate_id` during the search: the sum of its
  /// recorded rungs other than rung 2 ("full") and the final rung.
  double recorded_device_s(const std::string& candidate_id) const;
  /// Seconds recorded for `candidate_id`'s rung named `rung` ("full", "final", ...), summed.
  double recorded_rung_s(const std::string& candidate_id, const std::string& rung) const;
  /// Whether `candidate_id` has a recorded rung named `rung`.
  bool has_rung(const std::string& candidate_id, const std::string& rung) const;

  /// The decision of `kind` with `key`, if one was recorded (this session or an earlier one).
  std::optional<nlohmann::json> recorded(const std::string& kind, const std::string& key) const;
  /// Records `decision` (its "kind" and "key" set here) unless one with the same kind and key
  /// exists; returns whether it was written.
  bool decide(int step, const std::string& kind, const std::string& key, nlohmann::json decision);

 private:
  std::unique_ptr<report::RunDatabase> db_;
  bool resume_;
  std::map<std::string, report::CandidateRow> candidates_;
  std::map<std::string, nlohmann::json> decisions_;  // "kind|key" -> decision
};

}  // namespace kforge::search

#include "search/run_journal.h"

#include <fmt/format.h>

#include "common/error.h"

namespace kforge::search {

namespace {

std::string decision_id(const std::string& kind, const std::string& key) {
  return kind + "|" + key;
}

std::string plan_key(int step) { return "step:" + std::to_string(step); }

std::string evidence_key(int step, size_t slot) { return fmt::format("step:{}:{}", step, slot); }

// The rung rows that count as search time on resume: all but rung 2 and the final rung, which
// the budget adds when they run (or are replayed).
bool search_time(const report::RungRow& row) {
  return row.rung != to_string(Rung::full) && row.rung != to_string(Rung::final);
}

}  // namespace

ReplayJournal::ReplayJournal(const report::RunDatabase& database) {
  for (report::CandidateRow& row : database.candidates()) {
    RecordedCandidate recorded;
    for (const report::RungRow& rung : database.rungs(row.id)) {
      if (search_time(rung)) recorded.device_s += rung.seconds;
      if (rung.rung == to_string(Rung::quick)) recorded.reached_quick = true;
      if (rung.rung == to_string(Rung::full)) full_rung_s_[row.id] += rung.seconds;
    }
    const std::string id = row.id;
    recorded.row = std::move(row);
    candidates_[id] = std::move(recorded);
  }
  for (nlohmann::json& decision : database.decisions()) {
    // The key first: json's operator= takes its argument by value, which would move first.
    const std::string id = decision_id(decision.value("kind", ""), decision.value("key", ""));
    decisions_[id] = std::move(decision);
  }
  reference_ = database.meta("reference");
  const nlohmann::json spent = database.meta("spent").value_or(nlohmann::json::object());
  spent_.wall_s = spent.value("wall_s", 0.0);
  spent_.cost_usd = spent.value("cost_usd", 0.0);
}

std::optional<nlohmann::json> ReplayJournal::decision(const std::string& kind,
                                                      const std::string& key) const {
  auto it = decisions_.find(decision_id(kind, key));
  if (it == decisions_.end()) return std::nullopt;
  return it->second;
}

const RecordedCandidate* ReplayJournal::candidate(const std::string& id) const {
  auto it = candidates_.find(id);
  return it == candidates_.end() ? nullptr : &it->second;
}

namespace {

// A recorded decision as its type; a row that does not parse names its kind and key.
template <typename Decision>
std::optional<Decision> parsed(const std::optional<nlohmann::json>& recorded,
                               const std::string& kind, const std::string& key) {
  if (!recorded) return std::nullopt;
  return with_context("run database: decision " + kind + " '" + key + "'",
                      [&] { return recorded->get<Decision>(); });
}

}  // namespace

std::optional<PlanDecision> ReplayJournal::plan(int step) const {
  return parsed<PlanDecision>(decision("plan", plan_key(step)), "plan", plan_key(step));
}

std::optional<AcceptanceDecision> ReplayJournal::acceptance(const std::string& challenger) const {
  return parsed<AcceptanceDecision>(decision("acceptance", challenger), "acceptance", challenger);
}

std::optional<AcceptanceDecision> ReplayJournal::final_challenge(
    const std::string& challenger) const {
  return parsed<AcceptanceDecision>(decision("final_challenge", challenger), "final_challenge",
                                    challenger);
}

std::optional<PromotionDecision> ReplayJournal::promotion(const std::string& candidate) const {
  return parsed<PromotionDecision>(decision("promotion", candidate), "promotion", candidate);
}

std::optional<RecordedFullRung> ReplayJournal::full_rung(const std::string& candidate) const {
  std::optional<FullRungDecision> decided =
      parsed<FullRungDecision>(decision("full_rung", candidate), "full_rung", candidate);
  if (!decided) return std::nullopt;
  auto seconds = full_rung_s_.find(candidate);
  return RecordedFullRung{std::move(*decided),
                          seconds == full_rung_s_.end() ? 0.0 : seconds->second};
}

bool ReplayJournal::evidence_written(int step, size_t slot) const {
  return decisions_.contains(decision_id("evidence", evidence_key(step, slot)));
}

std::optional<ReferenceTiming> ReplayJournal::reference() const {
  return parsed<ReferenceTiming>(reference_, "meta", "reference");
}

RunJournal::RunJournal(const std::filesystem::path& path, bool resume)
    : db_(report::RunDatabase::open(path)) {
  if (resume) replay_ = ReplayJournal(*db_);
  // A fresh run reads back too: a decision is written once whatever the caller does.
  for (report::CandidateRow& row : db_->candidates()) rows_[row.id] = std::move(row);
  for (const nlohmann::json& decision : db_->decisions()) {
    decided_.insert(decision_id(decision.value("kind", ""), decision.value("key", "")));
  }
}

void RunJournal::record_candidate(const report::CandidateRow& row) {
  db_->record_candidate(row);
  rows_[row.id] = row;
}

void RunJournal::reject_candidate(const std::string& id, Verdict verdict,
                                  const std::string& message) {
  auto it = rows_.find(id);
  if (it == rows_.end()) return;
  report::CandidateRow row = it->second;
  row.verdict = to_string(verdict);
  row.message = message;
  record_candidate(row);  // INSERT OR REPLACE: the row now says why
}

void RunJournal::record_rung(const std::string& id, Rung rung, Verdict verdict, double seconds,
                             const nlohmann::json& detail) {
  db_->record_rung({id, to_string(rung), to_string(verdict), seconds, detail});
}

void RunJournal::record_comparison(const AcceptanceDecision& decision, double seconds) {
  db_->record_rung(
      {decision.challenger, "compare", to_string(decision.outcome), seconds, decision});
}

void RunJournal::record_plan(const PlanDecision& plan) {
  decide(plan.step, "plan", plan_key(plan.step), plan);
}

void RunJournal::record_acceptance(int step, const AcceptanceDecision& decision) {
  decide(step, "acceptance", decision.challenger, decision);
}

void RunJournal::record_final_challenge(int step, const AcceptanceDecision& decision) {
  decide(step, "final_challenge", decision.challenger, decision);
}

void RunJournal::record_promotion(int step, const PromotionDecision& decision) {
  decide(step, "promotion", decision.candidate, decision);
}

void RunJournal::record_full_rung(int step, const FullRungDecision& decision) {
  decide(step, "full_rung", decision.candidate, decision);
}

void RunJournal::record_evidence(int step, size_t slot, const std::string& candidate,
                                 const std::string& direction, const std::string& strategy) {
  decide(step, "evidence", evidence_key(step, slot),
         {{"candidate", candidate}, {"direction", direction}, {"strategy", strategy}});
}

bool RunJournal::decide(int step, const std::string& kind, const std::string& key,
                        nlohmann::json decision) {
  if (!decided_.insert(decision_id(kind, key)).second) return false;
  decision["kind"] = kind;
  decision["key"] = key;
  db_->record_decision(step, decision);
  return true;
}

}  // namespace kforge::search

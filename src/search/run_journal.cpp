#include "search/run_journal.h"

namespace kforge::search {

namespace {

std::string decision_key(const std::string& kind, const std::string& key) {
  return kind + "|" + key;
}

}  // namespace

RunJournal::RunJournal(const std::filesystem::path& path, bool resume)
    : db_(report::RunDatabase::open(path)), resume_(resume) {
  // A fresh run reads back too: decide() must stay idempotent whatever the caller does.
  for (report::CandidateRow& row : db_->candidates()) candidates_[row.id] = std::move(row);
  for (nlohmann::json& decision : db_->decisions()) {
    // The key first: json's operator= takes its argument by value, which would move first.
    const std::string id = decision_key(decision.value("kind", ""), decision.value("key", ""));
    decisions_[id] = std::move(decision);
  }
}

const report::CandidateRow* RunJournal::recorded_candidate(const std::string& id) const {
  auto it = candidates_.find(id);
  return it == candidates_.end() ? nullptr : &it->second;
}

void RunJournal::record_candidate(const report::CandidateRow& row) {
  db_->record_candidate(row);
  candidates_[row.id] = row;
}

void RunJournal::record_rung(const report::RungRow& row) { db_->record_rung(row); }

double RunJournal::recorded_device_s(const std::string& candidate_id) const {
  double seconds = 0.0;
  for (const report::RungRow& rung : db_->rungs(candidate_id)) {
    if (rung.rung != "full" && rung.rung != "final") seconds += rung.seconds;
  }
  return seconds;
}

double RunJournal::recorded_rung_s(const std::string& candidate_id,
                                   const std::string& rung) const {
  double seconds = 0.0;
  for (const report::RungRow& row : db_->rungs(candidate_id)) {
    if (row.rung == rung) seconds += row.seconds;
  }
  return seconds;
}

bool RunJournal::has_rung(const std::string& candidate_id, const std::string& rung) const {
  for (const report::RungRow& row : db_->rungs(candidate_id)) {
    if (row.rung == rung) return true;
  }
  return false;
}

std::optional<nlohmann::json> RunJournal::recorded(const std::string& kind,
                                                   const std::string& key) const {
  auto it = decisions_.find(decision_key(kind, key));
  if (it == decisions_.end()) return std::nullopt;
  return it->second;
}

bool RunJournal::decide(int step, const std::string& kind, const std::string& key,
                        nlohmann::json decision) {
  const std::string id = decision_key(kind, key);
  if (decisions_.count(id)) return false;
  decision["kind"] = kind;
  decision["key"] = key;
  db_->record_decision(step, decision);
  decisions_[id] = std::move(decision);
  return true;
}

}  // namespace kforge::search

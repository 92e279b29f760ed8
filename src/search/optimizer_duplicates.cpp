// Identical candidates evaluated once (issue 21; duplicates.h), and the lineage of the best
// (lineage.h), in Optimizer::run (optimizer.h).
//
// A candidate whose duplicate key (normalized source, defines, backend) equals an earlier
// candidate's is a duplicate: it is not built, gated or timed, and costs no device seconds; its
// record carries the original's verdict and quick numbers and `duplicate_of`, it is judged
// "not_better" (or "rejected" with a failed original) without a comparison, never promoted,
// never a parent, and writes no memory evidence (record_evidence says why). It still counts as
// a candidate of the budget (the generator wrote it: an LLM answer that was paid for). Its row
// in the run database says duplicate_of, so --resume restores it as one.
#include <fmt/format.h>

#include "search/duplicates.h"
#include "search/optimizer.h"
#include "search/optimizer_move.h"

namespace kforge::search {
namespace fs = std::filesystem;

const CandidateRecord* Optimizer::original_of(const generation::Proposal& proposal) const {
  const auto it = originals_.find(duplicate_key(proposal.job));
  if (it == originals_.end() || it->second == proposal.id) return nullptr;
  for (const CandidateRecord& r : records_) {
    if (r.id == it->second) return &r;
  }
  return nullptr;
}

bool Optimizer::batch_duplicate(const generation::Proposal& proposal,
                                std::set<std::string>& batch_keys) {
  const std::string key = duplicate_key(proposal.job);
  if (originals_.count(key)) return true;
  return !batch_keys.insert(key).second;
}

void Optimizer::remember_original(const generation::Proposal& proposal,
                                  const CandidateRecord& record) {
  if (!record.duplicate_of.empty()) return;
  originals_.emplace(duplicate_key(proposal.job), record.id);
}

CandidateRecord Optimizer::record_duplicate(const generation::Proposal& proposal,
                                            const CandidateRecord& original, int step,
                                            const Move* move) {
  CandidateRecord record = new_record(proposal, step);
  record.duplicate_of = original.id;
  record.duplicate_of_index = original.index;
  record.verdict = original.verdict;
  record.message = original.message;
  record.artifact_key = original.artifact_key;
  record.from_cache = true;
  record.build_log = original.build_log;
  record.median_ms = original.median_ms;
  record.quick_samples_ms = original.quick_samples_ms;
  record.quick_reference = original.quick_reference;
  record.full_geomean_speedup = original.full_geomean_speedup;
  record.full_workloads = original.full_workloads;
  record.rung = original.rung;
  take_move(record, move);
  const fs::path dir = run_dir_.candidate_dir(
      record.index, proposal.point.variant.empty() ? proposal.id : proposal.point.variant);
  write_source(proposal, dir, record);
  nlohmann::json evaluation = {{"id", record.id},
                               {"duplicate_of", original.id},
                               {"duplicate_of_index", original.index},
                               {"verdict", to_string(record.verdict)},
                               {"message", record.message},
                               {"artifact_key", record.artifact_key},
                               {"from_cache", true},
                               {"samples_ms", record.quick_samples_ms}};
  if (record.quick_reference) evaluation["quick_reference"] = *record.quick_reference;
  run_dir_.write_json(dir / "evaluation.json", evaluation);
  evaluation["source_file"] = record.source_file;
  evaluation["build_log"] = record.build_log;
  journal_->record_candidate({record.id, record.index, record.step, record.parent_id,
                              record.direction_id, record.strategy_id, record.change,
                              to_string(record.verdict), record.message, record.artifact_key,
                              0.0, record.median_ms, record.log_gain, evaluation});
  return record;
}

void Optimizer::sync_duplicates() {
  for (CandidateRecord& r : records_) {
    if (r.duplicate_of.empty()) continue;
    const CandidateRecord* original = find_record(r.duplicate_of);
    if (original == nullptr) continue;
    r.verdict = original->verdict;
    r.message = original->message;
    r.full_geomean_speedup = original->full_geomean_speedup;
    r.full_workloads = original->full_workloads;
  }
}

std::vector<LineageStep> Optimizer::best_lineage() const {
  if (!best_) return {};
  std::vector<LineageStep> steps;
  for (const CandidateRecord& r : records_) {
    LineageStep s;
    s.index = r.index;
    s.step = r.step;
    s.id = r.id;
    s.parent_id = r.parent_id;
    s.direction_id = r.direction_id;
    s.strategy_id = r.strategy_id;
    if (r.full_geomean_speedup) {
      s.speedup = *r.full_geomean_speedup;
      s.speedup_rung = "full";
    } else if (r.median_ms && *r.median_ms > 0.0) {
      s.speedup = quick_speedup(r);
      s.speedup_rung = "quick";
    }
    s.support = r.support;
    steps.push_back(std::move(s));
  }
  return trace_lineage(steps, best_->id);
}

}  // namespace kforge::search

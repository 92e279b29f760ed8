// One candidate's life in Optimizer::run (optimizer.h): screened, built, gated and timed (or
// restored from the run database on resume), judged against the best (optimizer_acceptance.cpp),
// reported to the generator, and written to the run directory and the run database.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "backends/backend.h"
#include "common/error.h"
#include "search/optimizer.h"
#include "search/optimizer_move.h"
#include "worker/candidate_router.h"

namespace kforge::search {
namespace fs = std::filesystem;

namespace {

// A build log kept in the run database for a repair prompt: the head, where errors start.
constexpr size_t kBuildLogBytes = 64 * 1024;

}  // namespace

std::future<compile::Artifact> Optimizer::submit_screened(const generation::Proposal& proposal) {
  const std::string violations =
      evaluator_.screen(proposal.job.source, proposal.job.source_name, backend_);
  // A ModelNew that cannot stand in for Model is told so before its (slow) build.
  const std::string wrong_shape =
      violations.empty() ? evaluator_.check_signature(proposal.job.source, proposal.job.source_name)
                         : "";
  if (violations.empty() && wrong_shape.empty()) return builds_.submit(proposal.job);
  std::promise<compile::Artifact> rejected;
  compile::Artifact artifact;
  if (!violations.empty()) {
    artifact.verdict = Verdict::rejected_by_policy;
    artifact.log = "rejected by the task's source policy:\n" + violations;
  } else {
    artifact.verdict = Verdict::wrong_signature;
    artifact.log = wrong_shape;
  }
  rejected.set_value(std::move(artifact));
  return rejected.get_future();
}

Optimizer::Evaluated Optimizer::evaluate_now(const std::function<compile::Artifact()>& build) {
  Evaluated evaluated;
  {
    auto phase = phases_.enter("compile_wait");
    evaluated.artifact = build();
  }
  evaluated.outcome = evaluator_.evaluate(evaluated.artifact, workers_.at(0));
  return evaluated;
}

std::vector<std::optional<Optimizer::Evaluated>> Optimizer::evaluate_batch(
    const std::vector<const generation::Proposal*>& proposals,
    std::vector<std::shared_future<compile::Artifact>>& builds) {
  std::vector<std::optional<Evaluated>> evaluated(proposals.size());
  if (workers_.size() < 2) return evaluated;
  std::vector<size_t> pending;  // indexes into proposals, in the plan's order
  for (size_t i = 0; i < proposals.size(); ++i) {
    if (builds[i].valid()) pending.push_back(i);
  }
  if (!backends::get_backend(backend_).can.builds_overlap_timing) {
    auto phase = phases_.enter("compile_wait");
    for (size_t i : pending) builds[i].wait();
  }
  // Never start more than the candidate budget has room for (the rest would be discarded).
  int room = std::numeric_limits<int>::max();
  if (options_.budget.max_candidates) {
    room = std::max(0, *options_.budget.max_candidates - budget_->spend().candidates);
  }
  int started = 0;
  workers_.run(
      pending.size(),
      [&](size_t job, size_t worker) {
        const size_t i = pending[job];
        Evaluated e;
        e.artifact = builds[i].get();
        e.worker = worker;
        e.outcome = evaluator_.evaluate(e.artifact, workers_.at(worker));
        evaluated[i] = std::move(e);
      },
      [&] { return interrupts() == 0 && started++ < room; });
  return evaluated;
}

std::string Optimizer::source_extension_of(const generation::Proposal& proposal) const {
  return worker::is_python_candidate(proposal.job.source_name)
             ? ".py"
             : backends::get_backend(backend_).source_extension;
}

CandidateRecord Optimizer::attempt(const generation::Proposal& proposal,
                                   const std::function<Evaluated()>& obtain, int step,
                                   const Move* move, generation::Feedback* feedback_out) {
  CandidateRecord record;
  if (const RecordedCandidate* recorded = journal_->replay().candidate(proposal.id)) {
    record = restore(proposal, *recorded);
  } else if (const CandidateRecord* original = original_of(proposal)) {
    record = record_duplicate(proposal, *original, step, move);
  } else {
    record = record_evaluation(proposal, obtain(), step, move);
  }
  if (move != nullptr) record.support = move->support;
  remember_original(proposal, record);
  proposals_[proposal.id] = proposal;
  budget_->add_candidate(record.device_s);
  const BudgetSpend spend = budget_->spend();
  record.found_device_s = spend.device_s;
  record.found_wall_s = spend.wall_s;
  if (record.median_ms) {
    record.quick_score = quick_score_of(record);
  }
  consider(record);
  generation::Feedback feedback;
  feedback.verdict = record.verdict;
  feedback.message = record.message;
  feedback.build_log = record.build_log;
  feedback.median_ms = record.median_ms;
  feedback.reference_ms = quick_reference_ms(record);
  feedback.is_best = best_ && best_->id == record.id;
  generator_.observe(proposal, feedback);
  if (feedback_out != nullptr) *feedback_out = feedback;
  return record;
}

CandidateRecord Optimizer::new_record(const generation::Proposal& proposal, int step) const {
  CandidateRecord record;
  record.index = static_cast<int>(records_.size());
  record.step = step;
  record.id = proposal.id;
  record.parent_id = proposal.parent_id;
  record.change = proposal.change;
  return record;
}

void Optimizer::take_move(CandidateRecord& record, const Move* move) const {
  if (move == nullptr) return;
  record.direction_id = move->direction_id;
  record.strategy_id = move->strategy_id;
  record.parent_id = move->parent_id;
  if (record.median_ms) record.log_gain = std::log(quick_speedup(record) / move->parent_speedup);
}

void Optimizer::write_source(const generation::Proposal& proposal, const fs::path& dir,
                             CandidateRecord& record) {
  const fs::path source = dir / ("source" + source_extension_of(proposal));
  run_dir_.write_text(source, generator_.standalone_source(proposal));
  record.source_file = source.string();
}

CandidateRecord Optimizer::record_evaluation(const generation::Proposal& proposal,
                                             const Evaluated& evaluated, int step,
                                             const Move* move) {
  const compile::Artifact& artifact = evaluated.artifact;
  const evaluation::CandidateEvaluation& outcome = evaluated.outcome;
  CandidateRecord record = new_record(proposal, step);
  record.artifact_key = artifact.key;
  record.from_cache = artifact.from_cache;
  // A Python candidate is built in its worker (load_inline at import): compile time too.
  record.compile_s = artifact.compile_s + outcome.worker_build_s;
  record.build_log = artifact.log.substr(0, kBuildLogBytes);
  record.verdict = outcome.verdict;
  record.message = outcome.message;
  for (const evaluation::RungRecord& rung : outcome.rungs) {
    if (rung.rung == Rung::quick) record.rung = Rung::quick;
  }
  if (!outcome.quick.warning.empty()) {
    // e.g. samples cut by the time limit, or warm-up calls much slower than timed ones
    progress_(fmt::format("        {} quick timing: warning: {}", proposal.id,
                          outcome.quick.warning));
  }
  if (outcome.verdict == Verdict::ok) {
    record.median_ms = outcome.timing.median_ms;
    record.quick_samples_ms = outcome.samples_ms;
    record.quick_reference = outcome.quick_reference;
    std::lock_guard<std::mutex> lock(handles_mutex_);
    handles_[proposal.id][evaluated.worker] = outcome.handle;
    homes_[proposal.id] = evaluated.worker;
    artifacts_[proposal.id] = artifact;
  }
  take_move(record, move);
  for (const evaluation::RungRecord& rung : outcome.rungs) record.device_s += rung.seconds;

  fs::path dir = run_dir_.candidate_dir(record.index, proposal.point.variant.empty()
                                                          ? proposal.id
                                                          : proposal.point.variant);
  write_source(proposal, dir, record);
  run_dir_.write_text(dir / "build.log", artifact.log);
  nlohmann::json evaluation = {{"id", record.id},
                               {"verdict", to_string(record.verdict)},
                               {"message", record.message},
                               {"artifact_key", record.artifact_key},
                               {"compile_s", record.compile_s},
                               {"worker_build_s", outcome.worker_build_s},
                               {"from_cache", record.from_cache},
                               {"rungs", outcome.rungs},
                               {"samples_ms", outcome.samples_ms},
                               {"timing", outcome.timing}};
  // What a resumed run reads the rung-1 speedup back from (restore).
  if (record.quick_reference) evaluation["quick_reference"] = *record.quick_reference;
  run_dir_.write_json(dir / "evaluation.json", evaluation);

  // The run database's row, written before anything is decided about the candidate: a crash
  // from here on loses no measurement.
  evaluation["source_file"] = record.source_file;
  evaluation["build_log"] = record.build_log;
  report::CandidateRow row{record.id,           record.index,        record.step,
                           record.parent_id,    record.direction_id, record.strategy_id,
                           record.change,       to_string(record.verdict), record.message,
                           record.artifact_key, record.compile_s,    record.median_ms,
                           record.log_gain,     evaluation};
  journal_->record_candidate(row);
  for (const evaluation::RungRecord& rung : outcome.rungs) {
    journal_->record_rung(record.id, rung.rung, rung.verdict, rung.seconds, rung.detail);
  }
  return record;
}

CandidateRecord Optimizer::restore(const generation::Proposal& proposal,
                                   const RecordedCandidate& recorded) {
  const report::CandidateRow& row = recorded.row;
  if (row.index != static_cast<int>(records_.size())) {
    throw Error(fmt::format("cannot resume {}: candidate {} was #{} when recorded but comes #{} "
                            "in the replay (the search took another path)",
                            run_dir_.path().string(), row.id, row.index, records_.size()));
  }
  CandidateRecord record;
  record.index = row.index;
  record.step = row.step;
  record.id = row.id;
  record.parent_id = row.parent_id;
  record.change = proposal.change;
  record.direction_id = row.direction_id;
  record.strategy_id = row.strategy_id;
  record.verdict = parse_verdict(row.verdict);
  record.message = row.message;
  record.artifact_key = row.artifact_key;
  record.compile_s = row.compile_s;
  record.median_ms = row.median_ms;
  record.log_gain = row.log_gain;
  record.from_cache = row.evaluation.value("from_cache", false);
  record.source_file = row.evaluation.value("source_file", "");
  record.build_log = row.evaluation.value("build_log", "");
  record.device_s = recorded.device_s;
  record.quick_samples_ms =
      row.evaluation.value("samples_ms", std::vector<double>{});
  // Runs recorded before rung 1 timed its own reference have none: reference_ms_ stands in.
  if (row.evaluation.contains("quick_reference")) {
    record.quick_reference = row.evaluation.at("quick_reference").get<evaluation::QuickReference>();
  }
  record.rung = recorded.reached_quick ? Rung::quick : Rung::gate;
  record.duplicate_of = row.evaluation.value("duplicate_of", "");
  if (!record.duplicate_of.empty()) {
    const CandidateRecord* original = find_record(record.duplicate_of);
    record.duplicate_of_index = original != nullptr ? original->index : -1;
    record.rung = original != nullptr ? original->rung : Rung::gate;
  }
  record.replayed = true;
  ++result_.replayed_candidates;
  return record;
}

void Optimizer::record_evidence(const Move& move, const CandidateRecord& record, int step,
                                size_t slot) {
  // A duplicate writes no evidence. What it would add is a measurement the store already holds:
  // the original's row (its verdict and gain) was written when the original's move was, so a
  // second row with the same numbers would count one measurement twice in the direction's,
  // the strategy's and the edges' statistics (success rate, mean and trend), and a row with a
  // zero gain would blame the direction for the generator answering an old kernel. The move's
  // direction still enters the prefix (it was chosen), and the policy may choose the move
  // again, as after a generation failure. (A repair that repeats its move's failed try is not
  // the move's outcome: repair_until_ok keeps the try, whose failure is written.)
  if (!record.duplicate_of.empty()) return;
  // The decision first: a crash between the two writes loses this row rather than writing it
  // twice on resume.
  if (journal_->replay().evidence_written(step, slot)) return;
  journal_->record_evidence(step, slot, record.id, move.direction_id, move.strategy_id);
  memory::Evidence evidence;
  evidence.direction_id = move.direction_id;
  evidence.strategy_id = move.strategy_id;
  evidence.prefix.assign(state_.prefix.rbegin(), state_.prefix.rend());
  evidence.provenance = provenance();
  evidence.verdict = to_string(record.verdict);
  evidence.log_gain = record.log_gain;
  // A promoted candidate's rung-2 result (every timed workload, more repetitions) is the better
  // evidence of what the move achieved; the others have only their quick rung.
  const CandidateRecord* measured = find_record(record.id);
  if (measured != nullptr && measured->full_geomean_speedup) {
    evidence.speedup_vs_baseline = *measured->full_geomean_speedup;
  } else if (record.median_ms) {
    evidence.speedup_vs_baseline = quick_speedup(record);
  }
  evidence.candidate_id = record.artifact_key;
  evidence.excerpt = proposals_.at(record.id).change;
  if (record.verdict != Verdict::ok) evidence.failure_reason = record.message.substr(0, 200);
  evidence.diagnosis = state_.last_feedback.summary();
  store_.record(evidence);
}

CandidateRecord* Optimizer::find_record(const std::string& id) {
  for (CandidateRecord& r : records_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

size_t Optimizer::home_of(const std::string& id) {
  std::lock_guard<std::mutex> lock(handles_mutex_);
  auto home = homes_.find(id);
  return home == homes_.end() ? 0 : home->second;
}

int Optimizer::handle_on(const std::string& id, size_t worker) {
  std::optional<compile::Artifact> artifact;
  {
    std::lock_guard<std::mutex> lock(handles_mutex_);
    if (auto it = handles_.find(id); it != handles_.end()) {
      if (auto on = it->second.find(worker); on != it->second.end()) return on->second;
    }
    if (auto it = artifacts_.find(id); it != artifacts_.end()) artifact = it->second;
  }
  if (!artifact) {
    // A candidate restored from the run database: built again (the artifact cache answers) and
    // loaded, never timed again.
    artifact = builds_.submit(proposals_.at(id).job).get();
    if (artifact->verdict != Verdict::ok) {
      throw Error("cannot resume: candidate " + id + " was correct when recorded but does not " +
                  "build now: " + artifact->log.substr(0, 400));
    }
  }
  worker::LoadResult loaded = evaluator_.load(*artifact, workers_.at(worker));
  if (loaded.verdict != Verdict::ok) {
    throw Error("candidate " + id + " was correct when evaluated but does not load on worker " +
                std::to_string(worker) + " now: " + to_string(loaded.verdict) + ": " +
                loaded.message);
  }
  std::lock_guard<std::mutex> lock(handles_mutex_);
  artifacts_[id] = *artifact;
  handles_[id][worker] = loaded.handle;
  return loaded.handle;
}

}  // namespace kforge::search

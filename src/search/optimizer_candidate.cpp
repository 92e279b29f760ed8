// One candidate's life in Optimizer::run (optimizer.h): screened, built, gated and timed (or
// restored from the run database on resume), judged against the best, reported to the
// generator, and written to the run directory and the run database.
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

// `reference_ms`: the reference median its quick speedup is over (Optimizer::quick_reference_ms).
std::string describe(const CandidateRecord& record, double reference_ms) {
  if (record.verdict != Verdict::ok) {
    std::string message = record.message.substr(0, 160);
    return fmt::format("{:<44} {}{}", record.id, to_string(record.verdict),
                       message.empty() ? "" : ": " + message);
  }
  return fmt::format("{:<44} ok  {:9.4f} ms  {:5.2f}x vs reference", record.id,
                     *record.median_ms, reference_ms / *record.median_ms);
}


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
  evaluated.artifact = build();
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
    record.quick_score = quick_score(record.quick_samples_ms, quick_reference_ms(record),
                                     evaluation_policy().acceptance_level);
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
  record.compile_s = artifact.compile_s;
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

void Optimizer::reject_after_check(const std::string& id, Verdict verdict,
                                   const std::string& message) {
  journal_->reject_candidate(id, verdict, message);
  for (CandidateRecord& earlier : records_) {
    if (earlier.id != id && earlier.duplicate_of != id) continue;
    // The same program: its duplicates share the verdict.
    if (earlier.id != id) journal_->reject_candidate(earlier.id, verdict, message);
    earlier.verdict = verdict;
    earlier.message = message;
  }
  run_dir_.append_event({{"event", "rejected_after_check"}, {"id", id},
                         {"verdict", to_string(verdict)}, {"message", message}});
}

AcceptanceDecision Optimizer::compare_with_best(const CandidateRecord& record) {
  // Decided once: a resumed run replays the verdict.
  if (std::optional<AcceptanceDecision> recorded = journal_->replay().acceptance(record.id)) {
    return *recorded;
  }
  AcceptanceDecision decided = compare_paired(*best_, record, "acceptance");
  journal_->record_acceptance(record.step, decided);
  return decided;
}

AcceptanceDecision Optimizer::compare_paired(const CandidateRecord& incumbent,
                                             const CandidateRecord& challenger,
                                             const std::string& event_name) {
  const double started = now_s_();
  // On the challenger's worker, where it is loaded; the incumbent is loaded there too.
  const size_t on = home_of(challenger.id);
  const int incumbent_handle = handle_on(incumbent.id, on);
  const evaluation::CompareOutcome compared =
      evaluator_.compare(incumbent_handle, handle_on(challenger.id, on), workers_.at(on));
  const std::optional<evaluation::PairedComparison>& paired = compared.paired;
  const double seconds = now_s_() - started;
  budget_->add_device_s(seconds);
  AcceptanceDecision decided;
  decided.incumbent = incumbent.id;
  decided.challenger = challenger.id;
  decided.outcome = paired ? paired->outcome : ComparisonOutcome::failed;
  if (paired) {
    decided.speedup = paired->speedup.speedup;
    decided.ci_low = paired->speedup.ci_low;
    decided.ci_high = paired->speedup.ci_high;
  } else {
    decided.failed = compared.failed_handle == incumbent_handle ? incumbent.id : challenger.id;
    decided.verdict = compared.verdict;
    decided.message = compared.message;
  }
  journal_->record_comparison(decided, seconds);
  nlohmann::json event = decided;
  event["event"] = event_name;
  run_dir_.append_event(event);
  return decided;
}

void Optimizer::consider(CandidateRecord& record) {
  progress_(fmt::format("  [{:03d}] {}{}{}", record.index,
                        describe(record, quick_reference_ms(record)),
                        record.duplicate_of.empty()
                            ? ""
                            : fmt::format("  same as #{} (not evaluated again)",
                                          record.duplicate_of_index),
                        record.replayed ? "  (replayed)" : ""));
  // The acceptance outcome (a new best or not); promotion to rung 2 is the scheduler's
  // separate decision (promote_cohort).
  const double min_gain = evaluation_policy().min_gain;
  AcceptanceOutcome outcome = AcceptanceOutcome::not_better;
  std::string reason;
  if (!record.duplicate_of.empty()) {
    // The original was judged already: a duplicate never becomes the best and costs no
    // comparison.
    outcome = record.verdict == Verdict::ok ? AcceptanceOutcome::not_better
                                            : AcceptanceOutcome::rejected;
    reason = fmt::format("same as #{} ({}): not evaluated again", record.duplicate_of_index,
                         record.duplicate_of);
  } else if (record.verdict != Verdict::ok) {
    outcome = AcceptanceOutcome::rejected;
    reason = to_string(record.verdict) +
             (record.message.empty() ? "" : ": " + record.message.substr(0, 200));
  } else if (!best_) {
    outcome = AcceptanceOutcome::accepted;
    reason = "first correct candidate";
  } else if (quick_speedup(record) * (1.0 - min_gain) <= quick_speedup(*best_)) {
    // Speedups, not medians: each is over the reference timed in its own window, so a best
    // timed on a quiet machine does not hide a faster candidate timed under load (issue 21).
    // With one reference for both this is "median not min_gain below the best's".
    reason = fmt::format("quick speedup {:.3f}x ({:.4f} ms) is not {:.0f}% above the best's ({}, "
                         "{:.3f}x, {:.4f} ms), each over the reference timed in its window",
                         quick_speedup(record), *record.median_ms, 100 * min_gain, best_->id,
                         quick_speedup(*best_), *best_->median_ms);
  } else {
    // Looks faster on the quick rung: accepted only if a paired, interleaved comparison with
    // the best shows the gain beyond noise.
    const AcceptanceDecision decided = compare_with_best(record);
    record.acceptance = decided.outcome;
    const Verdict checked = decided.verdict;
    if (checked == Verdict::wrong_answer || checked == Verdict::rejected_by_policy) {
      // A checked call of the comparison found a wrong output, a write outside a tensor or work
      // outside args->stream: that candidate gets the verdict, whichever rung saw it (issue 25).
      // A failed best gives its place to the challenger.
      const std::string& failed = decided.failed;
      const std::string message = "acceptance comparison: " + decided.message;
      progress_(fmt::format("        vs best {}: {} failed a checked call: {}", best_->id, failed,
                            to_string(checked)));
      reject_after_check(failed, checked, message);
      if (failed == record.id) {
        record.verdict = checked;
        record.message = message;
        outcome = AcceptanceOutcome::rejected;
        reason = to_string(checked) + ": " + message.substr(0, 200);
      } else {
        outcome = AcceptanceOutcome::accepted;
        reason = "the best (" + failed + ") failed a checked call: " + message.substr(0, 200);
      }
    } else {
      progress_(fmt::format("        vs best {}: {} ({:.3f}x, {:.0f}% CI [{:.3f}, {:.3f}])",
                            best_->id, to_string(decided.outcome), decided.speedup,
                            100 * evaluation_policy().acceptance_level, decided.ci_low,
                            decided.ci_high));
      outcome = decided.outcome == ComparisonOutcome::faster ? AcceptanceOutcome::accepted
                                                             : AcceptanceOutcome::not_better;
      reason = fmt::format("paired comparison with {}: {} ({:.3f}x, CI [{:.3f}, {:.3f}])",
                           best_->id, to_string(decided.outcome), decided.speedup,
                           decided.ci_low, decided.ci_high);
    }
  }
  if (options_.explain) progress_(fmt::format("        {}: {}", to_string(outcome), reason));
  journal_->decide(record.step, "outcome", record.id,
                   {{"candidate", record.id}, {"outcome", to_string(outcome)}, {"reason", reason}});
  if (outcome == AcceptanceOutcome::accepted) {
    best_ = record;
    if (!record.replayed) {
      run_dir_.append_event(
          {{"event", "new_best"}, {"id", record.id}, {"median_ms", *record.median_ms}});
    }
  }
  nlohmann::json event = {{"event", record.replayed ? "candidate_replayed" : "candidate"},
                          {"index", record.index},
                          {"id", record.id},
                          {"step", record.step},
                          {"verdict", to_string(record.verdict)},
                          {"outcome", to_string(outcome)},
                          {"median_ms", record.median_ms ? nlohmann::json(*record.median_ms)
                                                         : nlohmann::json()},
                          // the run's spend so far, for the report's best-so-far curves
                          {"spent_device_s", budget_->spend().device_s},
                          {"spent_wall_s", budget_->spend().wall_s}};
  if (record.quick_reference) event["quick_reference_ms"] = record.quick_reference->median_ms;
  if (!record.duplicate_of.empty()) {
    event["duplicate_of"] = record.duplicate_of;
    event["duplicate_of_index"] = record.duplicate_of_index;
  }
  run_dir_.append_event(event);
  records_.push_back(record);
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

// Judging a candidate against the search's best (Optimizer::consider, optimizer.h): the quick
// pre-check over each candidate's rung-1 window, the paired interleaved comparison when it looks
// faster (replayed on resume), and a rejection when a checked call of a later rung fails.
#include <fmt/format.h>

#include "search/optimizer.h"

namespace kforge::search {

namespace {

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

bool Optimizer::passes_gate_at_full_size(CandidateRecord& record) {
  // A replayed candidate passed it in the run that recorded it (or its row holds the
  // rejection); planes that gate everything at rung 0 run nothing here.
  if (record.replayed) return true;
  const size_t on = home_of(record.id);
  const evaluation::EvaluationPlane::FullSizeGate gate =
      evaluator_.gate_at_full_size(handle_on(record.id, on), workers_.at(on));
  if (gate.ran) {
    budget_->add_device_s(gate.seconds);
    // "Found" counts the checks a candidate needs before it can be the best: under full
    // fidelity rung 0 holds these cases, so both fidelities' device seconds to the best count
    // them (bench/ladder's "device s to best").
    const BudgetSpend spend = budget_->spend();
    record.found_device_s = spend.device_s;
    record.found_wall_s = spend.wall_s;
    run_dir_.append_event({{"event", "gate_at_full_size"},
                           {"id", record.id},
                           {"verdict", to_string(gate.verdict)},
                           {"cases", gate.cases},
                           {"seconds", gate.seconds},
                           {"message", gate.message}});
  }
  if (gate.verdict == Verdict::ok) {
    if (gate.ran && options_.explain) {
      progress_(fmt::format("        gate at full size: ok ({} case{}, {:.2f} s)", gate.cases,
                            gate.cases == 1 ? "" : "s", gate.seconds));
    }
    return true;
  }
  progress_(fmt::format("        {}: {}", to_string(gate.verdict), gate.message.substr(0, 200)));
  reject_after_check(record.id, gate.verdict, gate.message);
  record.verdict = gate.verdict;
  record.message = gate.message;
  return false;
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
  } else if (record.verdict != Verdict::ok ||
             ((!best_ || quick_speedup(record) * (1.0 - min_gain) > quick_speedup(*best_)) &&
              !passes_gate_at_full_size(record))) {
    // Failed rung 0 or 1, or, where the plane deferred them, the gate's timed-workload cases,
    // which run before a candidate can become the best (first correct one, or compared).
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

}  // namespace kforge::search

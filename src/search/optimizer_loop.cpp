// The expert hints and the search steps of Optimizer::run (optimizer.h).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "common/error.h"
#include "search/optimizer.h"
#include "search/optimizer_move.h"

namespace kforge::search {

std::function<Optimizer::Evaluated()> Optimizer::evaluated_or_now(
    std::vector<std::optional<Evaluated>>& evaluated,
    std::vector<std::shared_future<compile::Artifact>>& builds, size_t i,
    const generation::Proposal& proposal) {
  return [this, &evaluated, &builds, i, &proposal] {
    if (evaluated[i]) return std::move(*evaluated[i]);
    // No build was started for a candidate the batch took for a duplicate; should its original
    // not have been recorded after all, it is built now.
    if (!builds[i].valid()) return evaluate_now([&] { return submit_screened(proposal).get(); });
    return evaluate_now([&] { return builds[i].get(); });
  };
}

void Optimizer::start_hint_builds() {
  if (!backends::get_backend(backend_).can.builds_overlap_timing) return;
  std::vector<generation::Proposal> hints = generator_.initial_proposals();
  const bool all_written = std::all_of(hints.begin(), hints.end(), [](const auto& hint) {
    return !hint.job.source.empty();
  });
  std::vector<std::shared_future<compile::Artifact>> builds;
  if (all_written) builds = submit_hint_builds(hints);
  early_hints_.emplace(std::move(hints), std::move(builds));
}

std::vector<std::shared_future<compile::Artifact>> Optimizer::submit_hint_builds(
    const std::vector<generation::Proposal>& hints) {
  std::vector<std::shared_future<compile::Artifact>> builds(hints.size());
  std::set<std::string> batch_keys;
  for (size_t i = 0; i < hints.size(); ++i) {
    // Started before the journal is open (start_hint_builds), every hint is built; run_hints
    // drops the builds of those a resumed run replays.
    const bool replayed = journal_ && journal_->replay().candidate(hints[i].id);
    if (!replayed && !batch_duplicate(hints[i], batch_keys)) {
      builds[i] = submit_screened(hints[i]).share();
    }
  }
  return builds;
}

void Optimizer::run_hints() {
  // Expert hints, built in parallel, then evaluated: one at a time with one worker, else
  // concurrently on the pool (evaluate_batch); recorded and judged in their order either way.
  // With one worker a batch's builds all finish before any of its timings start: on cpu the
  // compilers would share the cores with the timed kernel.
  std::vector<generation::Proposal> hints;
  std::vector<std::shared_future<compile::Artifact>> builds;
  if (early_hints_) {
    hints = std::move(early_hints_->first);
    builds = std::move(early_hints_->second);
    early_hints_.reset();
    // Started before the journal was open: a resumed run's recorded hints are not evaluated.
    for (size_t i = 0; i < builds.size(); ++i) {
      if (journal_->replay().candidate(hints[i].id)) builds[i] = {};
    }
  } else {
    hints = generator_.initial_proposals();
  }
  const bool any_unwritten = std::any_of(hints.begin(), hints.end(), [](const auto& hint) {
    return hint.job.source.empty();
  });
  progress_(any_unwritten
                ? "step 0: the first kernel, written by the generator from the reference"
                : "step 0: expert hints (one kernel per parallel decomposition)");
  const std::set<std::string> written = write_hints(hints);
  first_written_by_generator_ = any_unwritten;
  if (builds.size() != hints.size()) builds = submit_hint_builds(hints);
  std::vector<const generation::Proposal*> batch;
  for (const generation::Proposal& hint : hints) batch.push_back(&hint);
  const bool overlap = backends::get_backend(backend_).can.builds_overlap_timing;
  for (auto& build : builds) {
    if (build.valid() && (workers_.size() == 1 || !overlap)) {
      auto phase = phases_.enter("compile_wait");
      build.wait();
    }
  }
  std::vector<std::optional<Evaluated>> evaluated = evaluate_batch(batch, builds);
  for (size_t i = 0; i < hints.size(); ++i) {
    if (should_stop()) return;
    generation::Proposal current = hints[i];
    generation::Feedback feedback;
    CandidateRecord record = attempt(current, evaluated_or_now(evaluated, builds, i, hints[i]),
                                     0, nullptr, &feedback);
    // A hint the generator wrote (a model's first kernel) is repaired like a step's move; the
    // built-in kernels and a native reference are not.
    if (written.count(current.id)) repair_until_ok(current, record, feedback, 0, nullptr);
  }
}

std::set<std::string> Optimizer::write_hints(std::vector<generation::Proposal>& hints) {
  std::vector<generation::Proposal*> unwritten;
  std::set<std::string> ids;
  for (generation::Proposal& hint : hints) {
    if (!hint.job.source.empty()) continue;
    unwritten.push_back(&hint);
    ids.insert(hint.id);
  }
  if (unwritten.empty()) return {};
  generator_.write_sources(unwritten);
  std::vector<generation::Proposal> kept;
  for (generation::Proposal& hint : hints) {
    if (hint.failure.empty() && ids.count(hint.id) && hint.job.source.empty()) {
      hint.failure = "the generator wrote no source";
    }
    if (hint.failure.empty()) {
      kept.push_back(std::move(hint));
      continue;
    }
    progress_(fmt::format("  [---] {:<44} generation failed: {}", hint.id, hint.failure));
    run_dir_.append_event({{"event", "generation_failed"},
                           {"step", 0},
                           {"id", hint.id},
                           {"reason", hint.failure}});
    proposals_[hint.id] = hint;
    ++generation_failures_;
  }
  hints = std::move(kept);
  return ids;
}

std::vector<Optimizer::Move> Optimizer::plan_step(const std::vector<std::string>& parents,
                                                  const std::map<std::string, double>& parent_speedup,
                                                  int step) {
  std::vector<Move> moves;
  std::set<std::string> planned;
  // The memory as the policy reads it while planning this step (nothing is written to the store
  // until the step's moves ran), for the support each choice had (memory/support.h).
  const memory::MemoryView view =
      memory::MemoryView::load(store_, state_.context, options_.provenance_weights);
  // Plans moves from `parent_id` until `limit` moves are planned or no strategy applies to it;
  // with `tune`, only strategies that keep the parent's decomposition apply.
  auto plan_from = [&](const std::string& parent_id, size_t limit, const std::string& why,
                       bool tune) {
    const generation::Proposal& parent = proposals_.at(parent_id);
    // A strategy is applicable when it turns the parent into a candidate not yet tried.
    auto proposal_for = [&](const memory::Strategy& s) -> std::optional<generation::Proposal> {
      std::optional<generation::Proposal> proposal = generator_.apply(parent, s);
      if (!proposal || proposals_.count(proposal->id) || planned.count(proposal->id)) {
        return std::nullopt;
      }
      if (tune && proposal->point.variant != parent.point.variant) return std::nullopt;
      return proposal;
    };
    while (moves.size() < limit) {
      std::optional<memory::PolicyChoice> choice = policy_->choose(
          state_, [&](const memory::Strategy& s) { return proposal_for(s).has_value(); }, rng_);
      if (!choice) break;
      std::optional<generation::Proposal> proposal = proposal_for(choice->strategy);
      planned.insert(proposal->id);
      moves.push_back({parent_id, parent_speedup.at(parent_id), choice->direction.id,
                       choice->strategy.id, why + choice->explanation, std::move(*proposal),
                       memory::choice_support(view, prior_evidence_rows_, state_, *choice,
                                              evidence_reads_)});
    }
  };
  const size_t total = static_cast<size_t>(options_.proposals_per_step);
  // Diversity slots: up to diversity_slots of the step's moves (never all of them) tune the
  // best candidate of another parallel decomposition than the best's (strategies that keep its
  // decomposition; a switch would only revisit step 0's hints), so a decomposition that loses
  // at its defaults but wins after two or three edits is still refined when the best has
  // untried neighbours left (on the H200 log-softmax bf16 at 1024 x 32000 went from 0.058 to
  // 0.049 ms in 3 steps: bench/kernels/README.md).
  const size_t reserved = static_cast<size_t>(
      std::clamp(options_.diversity_slots, 0, options_.proposals_per_step - 1));
  const std::string best_decomposition = decomposition_of(best_->id);
  // Parents in order of speed: the best first; slower promoted candidates are mutated only when
  // the best has no untried neighbour left (so the search does not stall on a corner).
  for (const std::string& parent_id : parents) {
    if (moves.size() >= total - reserved) break;
    plan_from(parent_id, total - reserved, "", false);
  }
  if (reserved > 0 && !best_decomposition.empty()) {
    // The fastest candidate of each other decomposition, in the parents' order, until the
    // reserved slots are planned.
    std::set<std::string> tried = {best_decomposition};
    for (const std::string& parent_id : parents) {
      if (moves.size() >= total) break;
      const std::string decomposition = decomposition_of(parent_id);
      if (decomposition.empty() || !tried.insert(decomposition).second) continue;
      plan_from(parent_id, total,
                fmt::format("diversity slot: tunes the best {} candidate, another decomposition "
                            "than the best's ({}); ",
                            decomposition, best_decomposition),
                true);
    }
  }
  // Slots the other decompositions left open go to the usual order.
  for (const std::string& parent_id : parents) {
    if (moves.size() >= total) break;
    plan_from(parent_id, total, "", false);
  }
  // Recorded with the rng state after planning, so that a resumed run plans nothing again.
  PlanDecision plan;
  plan.step = step;
  for (const Move& move : moves) {
    plan.moves.push_back({move.parent_id, move.direction_id, move.strategy_id, move.proposal.id,
                          move.explanation, move.support});
  }
  std::ostringstream rng_state;
  rng_state << rng_;
  plan.rng = rng_state.str();
  journal_->record_plan(plan);
  return moves;
}

std::vector<Optimizer::Move> Optimizer::replay_plan(const PlanDecision& plan,
                                                    const std::map<std::string, double>& parent_speedup) {
  const int step = plan.step;
  std::vector<Move> moves;
  for (const PlannedMove& recorded : plan.moves) {
    const std::string& parent_id = recorded.parent_id;
    const std::string& direction_id = recorded.direction_id;
    const std::string& strategy_id = recorded.strategy_id;
    const std::string& candidate_id = recorded.candidate_id;
    std::optional<memory::Strategy> strategy;
    for (const memory::Strategy& s : store_.strategies(direction_id)) {
      if (s.id == strategy_id) strategy = s;
    }
    auto parent = proposals_.find(parent_id);
    if (!strategy || parent == proposals_.end() || !parent_speedup.count(parent_id)) {
      throw Error(fmt::format("cannot resume: step {} was planned as {} applied to {}, which this "
                              "replay {}", step, strategy_id, parent_id,
                              strategy ? "has not evaluated as a correct candidate"
                                       : "cannot find in the memory"));
    }
    std::optional<generation::Proposal> proposal = generator_.apply(parent->second, *strategy);
    if (!proposal || proposal->id != candidate_id) {
      throw Error(fmt::format("cannot resume: step {} recorded candidate {} from {} on {}; the "
                              "generator now gives {}", step, candidate_id, strategy_id,
                              parent_id, proposal ? proposal->id : "nothing"));
    }
    moves.push_back({parent_id, parent_speedup.at(parent_id), direction_id, strategy_id,
                     recorded.explanation, std::move(*proposal), recorded.support});
  }
  std::istringstream rng_state(plan.rng);
  rng_state >> rng_;
  return moves;
}

void Optimizer::write_sources(std::vector<Move>& moves, int step) {
  std::vector<generation::Proposal*> pending;
  for (Move& move : moves) pending.push_back(&move.proposal);
  generator_.write_sources(pending);
  std::vector<Move> written;
  for (Move& move : moves) {
    if (move.proposal.failure.empty()) {
      written.push_back(std::move(move));
      continue;
    }
    // Not an attempt of the strategy (the generator failed, not the kernel): no evidence, but
    // the (parent, strategy) pair is not planned again.
    progress_(fmt::format("  [---] {:<44} generation failed: {}", move.proposal.id,
                          move.proposal.failure));
    run_dir_.append_event({{"event", "generation_failed"},
                           {"step", step},
                           {"id", move.proposal.id},
                           {"strategy", move.strategy_id},
                           {"parent", move.parent_id},
                           {"reason", move.proposal.failure}});
    proposals_[move.proposal.id] = move.proposal;
    ++generation_failures_;
  }
  moves = std::move(written);
}

std::pair<std::vector<std::string>, std::map<std::string, double>>
Optimizer::parents_in_order() const {
  // The best first; then the candidates promoted to rung 2, fastest geomean first; then the
  // other correct ones by quick speedup, each over its own window's reference (reached only
  // when the better parents have no untried neighbour left, so the search does not stall on a
  // corner).
  std::vector<const CandidateRecord*> promoted;
  std::vector<const CandidateRecord*> others;
  for (const CandidateRecord& r : records_) {
    // A duplicate's neighbours are its original's.
    if (!r.median_ms || !r.duplicate_of.empty()) continue;
    (r.full_geomean_speedup ? promoted : others).push_back(&r);
  }
  std::stable_sort(promoted.begin(), promoted.end(), [](const auto* a, const auto* b) {
    return *a->full_geomean_speedup > *b->full_geomean_speedup;
  });
  std::stable_sort(others.begin(), others.end(), [&](const auto* a, const auto* b) {
    return quick_speedup(*a) > quick_speedup(*b);
  });
  std::vector<std::string> parents = {best_->id};
  std::map<std::string, double> parent_speedup = {{best_->id, quick_speedup(*best_)}};
  for (const auto* list : {&promoted, &others}) {
    for (const CandidateRecord* r : *list) {
      if (parent_speedup.emplace(r->id, quick_speedup(*r)).second) parents.push_back(r->id);
    }
  }
  return {parents, parent_speedup};
}

void Optimizer::repair_until_ok(generation::Proposal& current, CandidateRecord& record,
                                generation::Feedback& feedback, int step, const Move* move) {
  // Bounded repair loop: the failure goes back to the generator, each try a new candidate.
  // A duplicate of a failed candidate is not repaired: its original had its repairs, and the
  // same failure would get the same answers.
  for (int attempt_number = 1; record.verdict != Verdict::ok && record.duplicate_of.empty() &&
                               attempt_number <= options_.repair_tries;
       ++attempt_number) {
    if (should_stop(true)) break;
    progress_(fmt::format("        repair {}/{} of {} ({})", attempt_number,
                          options_.repair_tries, current.id, to_string(record.verdict)));
    std::optional<generation::Proposal> repaired = generator_.repair(current, feedback);
    if (!repaired || proposals_.count(repaired->id)) break;
    if (!repaired->failure.empty()) {
      progress_(fmt::format("  [---] {:<44} repair failed: {}", repaired->id, repaired->failure));
      run_dir_.append_event({{"event", "generation_failed"}, {"step", step},
                             {"id", repaired->id}, {"reason", repaired->failure}});
      proposals_[repaired->id] = *repaired;
      ++generation_failures_;
      break;
    }
    CandidateRecord tried = attempt(
        *repaired, [&] { return evaluate_now([&] { return submit_screened(*repaired).get(); }); },
        step, move, &feedback);
    // A repair that answers a kernel already tried is recorded (as its duplicate) and ends the
    // loop; the move's outcome stays the last try that was evaluated, so its failure is what
    // the memory learns.
    if (!tried.duplicate_of.empty()) break;
    current = std::move(*repaired);
    record = std::move(tried);
  }
}

void Optimizer::run_steps() {
  rng_.seed(options_.seed);
  state_ = memory::StateSummary{};
  state_.context = provenance();
  state_.task_name = task_.name;
  if (result_.stopped_by != StopReason::none) return;
  if (!best_) {
    stop(StopReason::no_correct,
         first_written_by_generator_
             ? "no first kernel the generator wrote passed the gate (after its repairs): "
               "nothing to refine"
             : "no expert hint passed the gate: nothing to refine");
    return;
  }
  state_.last_feedback = diagnose(*best_);
  for (int step = 1; step <= options_.steps; ++step) {
    const auto [parents, parent_speedup] = parents_in_order();
    state_.step = step;
    if (should_stop(true)) return;
    budget_->start_step();
    state_.best_id = best_->id;
    state_.best_ms = *best_->median_ms;
    state_.best_speedup = quick_speedup(*best_);
    const std::optional<PlanDecision> plan = journal_->replay().plan(step);
    std::vector<Move> moves =
        plan ? replay_plan(*plan, parent_speedup) : plan_step(parents, parent_speedup, step);
    if (moves.empty()) {
      stop(StopReason::exhausted,
           fmt::format("step {}: no applicable strategy left on any correct candidate", step));
      return;
    }
    progress_line(fmt::format("step {}/{}", step, options_.steps));
    progress_(fmt::format("step {}/{}: {} candidates, best so far {} ({:.4f} ms){}", step,
                          options_.steps, moves.size(), best_->id, *best_->median_ms,
                          plan ? " (plan replayed from the run database)" : ""));
    // The directions and strategies the step chose, and the direction chosen last before it
    // ("after"; null at the first step): each move's evidence updates the HTG edge from it, which
    // report.html highlights on the memory's graph (report/memory_graph.h).
    nlohmann::json chosen = nlohmann::json::array();
    for (const Move& move : moves) {
      chosen.push_back({{"direction", move.direction_id}, {"strategy", move.strategy_id}});
    }
    run_dir_.append_event({{"event", "step"}, {"step", step}, {"candidates", moves.size()},
                           {"best", best_->id},
                           {"after", state_.prefix.empty() ? nlohmann::json()
                                                           : nlohmann::json(state_.prefix.back())},
                           {"moves", chosen}});
    write_sources(moves, step);
    run_moves(moves, step);
    if (result_.stopped_by != StopReason::none) return;
  }
  result_.stopped_by = StopReason::steps;
  journal_->decide(options_.steps, "stopped", "steps", {{"by", "steps"}});
}

void Optimizer::run_moves(std::vector<Move>& moves, int step) {
  std::vector<std::shared_future<compile::Artifact>> builds(moves.size());
  std::vector<const generation::Proposal*> batch;
  std::set<std::string> batch_keys;
  for (size_t i = 0; i < moves.size(); ++i) {
    if (!journal_->replay().candidate(moves[i].proposal.id) &&
        !batch_duplicate(moves[i].proposal, batch_keys)) {
      builds[i] = submit_screened(moves[i].proposal).share();
    }
    batch.push_back(&moves[i].proposal);
  }
  const bool overlap = backends::get_backend(backend_).can.builds_overlap_timing;
  for (auto& build : builds) {
    if (build.valid() && (workers_.size() == 1 || !overlap)) {
      auto phase = phases_.enter("compile_wait");
      build.wait();
    }
  }
  // A step's first attempts run concurrently on the pool; the repairs (each depends on the
  // failure before it) and everything recorded or decided follow in the plan's order.
  std::vector<std::optional<Evaluated>> evaluated = evaluate_batch(batch, builds);
  CandidateRecord last;
  std::vector<std::pair<size_t, CandidateRecord>> done;  // (move slot, final outcome)
  for (size_t i = 0; i < moves.size(); ++i) {
    const Move& move = moves[i];
    if (should_stop()) break;
    if (options_.explain) {
      // The explanation's later lines (the strategy under the direction) line up under its first.
      std::string why = move.explanation;
      for (size_t at = why.find('\n'); at != std::string::npos; at = why.find('\n', at + 1)) {
        why.insert(at + 1, "        ");
      }
      progress_("    why " + move.proposal.id + ": " + why);
    }
    generation::Proposal current = move.proposal;
    generation::Feedback feedback;
    CandidateRecord record = attempt(current, evaluated_or_now(evaluated, builds, i, move.proposal),
                                     step, &move, &feedback);
    repair_until_ok(current, record, feedback, step, &move);
    state_.last_direction_id = move.direction_id;
    last = record;
    done.emplace_back(i, record);
  }
  if (done.empty()) return;
  // The step's cohort competes for rung 2 before the memory update, so that a promoted
  // candidate's full-rung result is what the memory learns (optimizer.h).
  promote_cohort(step);
  // One piece of evidence per move: its final outcome after any repairs.
  for (const auto& [slot, record] : done) record_evidence(moves[slot], record, step, slot);
  for (const Move& move : moves) state_.prefix.push_back(move.direction_id);
  // Last feedback for the next step: the verdict and gain of the latest attempt, the
  // bandwidth and roofline position of the best (the candidate the next step refines).
  memory::Diagnosis of_best = diagnose(*best_);
  state_.last_feedback = diagnose(last);
  state_.last_feedback.bandwidth_fraction = of_best.bandwidth_fraction;
  state_.last_feedback.memory_bound = of_best.memory_bound;
}

}  // namespace kforge::search

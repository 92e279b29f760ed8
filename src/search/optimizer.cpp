#include "search/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>

#include <fmt/format.h>

#include "common/error.h"
#include "common/files.h"
#include "compile/compile_pool.h"
#include "memory/policy.h"
#include "task/task_loader.h"

namespace kforge::search {
namespace fs = std::filesystem;

struct Optimizer::Move {
  std::string parent_id;
  std::string direction_id;
  std::string strategy_id;
  std::string explanation;
  generation::Proposal proposal;
};

Optimizer::Optimizer(const Task& task, std::string backend, OptimizeOptions options,
                     memory::Store& store, generation::Generator& generator,
                     compile::Compiler& compiler, worker::Worker& candidate_worker,
                     worker::Worker& reference_worker, report::RunDirectory& run_dir,
                     ProgressSink progress, memory::StrategySelector* selector)
    : task_(task),
      backend_(std::move(backend)),
      options_(options),
      store_(store),
      generator_(generator),
      compiler_(compiler),
      worker_(candidate_worker),
      reference_worker_(reference_worker),
      run_dir_(run_dir),
      progress_(std::move(progress)),
      selector_(selector) {}

memory::Provenance Optimizer::provenance() const {
  memory::Provenance p;
  p.backend = backend_;
  p.device = device_.name;
  p.compute_capability = device_.compute_capability;
  p.toolchain = toolchain_;
  p.family = task_.family;
  p.task_hash = task_hash_;
  return p;
}

std::vector<Optimizer::Move> Optimizer::plan_step(const std::vector<std::string>& parents,
                                                  const memory::StateSummary& state,
                                                  std::mt19937_64& rng) {
  std::vector<Move> moves;
  std::set<std::string> planned;
  // Parents in order of speed: the best first; slower promoted candidates are mutated only when
  // the best has no untried neighbour left (so the search does not stall on a corner).
  for (const std::string& parent_id : parents) {
    const generation::Proposal& parent = proposals_.at(parent_id);
    // A strategy is applicable when it turns the parent into a candidate not yet tried.
    auto proposal_for = [&](const memory::Strategy& s) -> std::optional<generation::Proposal> {
      std::optional<generation::Proposal> proposal = generator_.apply(parent, s);
      if (!proposal || proposals_.count(proposal->id) || planned.count(proposal->id)) {
        return std::nullopt;
      }
      return proposal;
    };
    while (static_cast<int>(moves.size()) < options_.proposals_per_step) {
      std::optional<memory::PolicyChoice> choice = policy_->choose(
          state, [&](const memory::Strategy& s) { return proposal_for(s).has_value(); }, rng);
      if (!choice) break;
      std::optional<generation::Proposal> proposal = proposal_for(choice->strategy);
      planned.insert(proposal->id);
      moves.push_back({parent_id, choice->direction.id, choice->strategy.id, choice->explanation,
                       std::move(*proposal)});
    }
    if (static_cast<int>(moves.size()) >= options_.proposals_per_step) break;
  }
  return moves;
}

memory::Diagnosis Optimizer::diagnose(const CandidateRecord& record) const {
  return memory::diagnose(to_string(record.verdict), record.log_gain, record.median_ms,
                          static_cast<double>(bytes_moved_), flops_, copy_bytes_per_s_,
                          peak_flops_per_s_);
}

CandidateRecord Optimizer::evaluate(const generation::Proposal& proposal,
                                    const compile::Artifact& artifact, int step,
                                    evaluation::Evaluator& evaluator) {
  CandidateRecord record;
  record.index = static_cast<int>(records_.size());
  record.step = step;
  record.id = proposal.id;
  record.parent_id = proposal.parent_id;
  record.change = proposal.change;
  record.artifact_key = artifact.key;
  record.from_cache = artifact.from_cache;
  record.compile_s = artifact.compile_s;
  evaluation::CandidateEvaluation outcome = evaluator.evaluate(artifact);
  record.verdict = outcome.verdict;
  record.message = outcome.message;
  if (outcome.verdict == Verdict::ok) {
    record.median_ms = outcome.timing.median_ms;
    handles_[proposal.id] = outcome.handle;
    artifacts_[proposal.id] = artifact;
  }
  proposals_[proposal.id] = proposal;

  fs::path dir = run_dir_.candidate_dir(record.index, proposal.point.variant.empty()
                                                          ? proposal.id
                                                          : proposal.point.variant);
  std::string extension = backend_ == "cuda" ? ".cu" : ".cpp";
  run_dir_.write_text(dir / ("source" + extension), generator_.standalone_source(proposal));
  run_dir_.write_text(dir / "build.log", artifact.log);
  record.source_file = (dir / ("source" + extension)).string();
  nlohmann::json evaluation = {{"id", record.id},
                               {"verdict", to_string(record.verdict)},
                               {"message", record.message},
                               {"artifact_key", record.artifact_key},
                               {"compile_s", record.compile_s},
                               {"from_cache", record.from_cache},
                               {"rungs", outcome.rungs},
                               {"samples_ms", outcome.samples_ms},
                               {"timing", outcome.timing}};
  run_dir_.write_json(dir / "evaluation.json", evaluation);
  return record;
}

std::future<compile::Artifact> Optimizer::submit_screened(compile::CompilePool& pool,
                                                          const generation::Proposal& proposal,
                                                          const evaluation::Evaluator& evaluator) {
  const std::string violations =
      evaluator.screen(proposal.job.source, proposal.job.source_name, backend_);
  if (violations.empty()) return pool.submit(proposal.job);
  std::promise<compile::Artifact> rejected;
  compile::Artifact artifact;
  artifact.verdict = Verdict::rejected_by_policy;
  artifact.log = "rejected by the task's source policy:\n" + violations;
  rejected.set_value(std::move(artifact));
  return rejected.get_future();
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

bool Optimizer::generator_exhausted(OptimizeResult& result) {
  std::string why = generator_.exhausted();
  if (why.empty()) return false;
  if (result.stopped_early.empty()) {
    result.stopped_early = why;
    progress_("stopping the search: " + why);
    run_dir_.append_event({{"event", "stopped"}, {"reason", why}});
  }
  return true;
}

namespace {

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

std::vector<compile::Artifact> Optimizer::collect_builds(
    std::vector<std::future<compile::Artifact>>& builds) const {
  // A batch's builds (in parallel in the pool) all finish before any of its timings start: on
  // cpu the compilers would share the cores with the timed kernel, and on cuda with the host
  // thread that launches it. The cost is one batch's longest compile, not their sum.
  std::vector<compile::Artifact> artifacts;
  artifacts.reserve(builds.size());
  for (auto& build : builds) artifacts.push_back(build.get());
  return artifacts;
}

OptimizeResult Optimizer::run() {
  auto started = std::chrono::steady_clock::now();
  OptimizeResult result;
  result.run_dir = run_dir_.path().string();
  result.backend = backend_;
  // The reference worker's hello carries the measured copy bandwidth and FMA rate.
  device_ = reference_worker_.device_info();
  toolchain_ = compiler_.toolchain(backend_);
  task_hash_ = task_hash(task_);
  result.device = device_;
  result.toolchain = toolchain_;
  progress_(fmt::format("device: {} ({}), toolchain: {}", device_.name,
                        backend_ == "cuda" ? "sm " + device_.compute_capability : "cpu",
                        toolchain_));

  run_dir_.append_event({{"event", "run_started"},
                         {"task", task_.name},
                         {"backend", backend_},
                         {"device", device_.name},
                         {"toolchain", toolchain_},
                         {"seed", options_.seed}});
  evaluation::Evaluator evaluator(worker_, reference_worker_, task_, options_.evaluation);
  const Workload& timed = evaluator.timed_workload();
  result.bytes_moved = min_bytes_moved(task_.signature, timed);
  result.flops = flops_per_call(task_, timed);
  bytes_moved_ = result.bytes_moved;
  flops_ = result.flops;
  memory::PolicyConfig policy_config;
  policy_config.temperature = options_.temperature;
  policy_config.ablations = options_.ablations;
  policy_config.weights = options_.provenance_weights;
  policy_ = memory::make_search_policy(options_.policy, store_, policy_config, selector_);
  if (options_.policy == memory::PolicyKind::oneshot) {
    options_.steps = std::min(options_.steps, 1);
    options_.proposals_per_step = 1;
  }
  const std::string ablated = memory::to_string(options_.ablations);
  progress_(fmt::format("policy: {}{}", policy_->name(),
                        ablated.empty() ? "" : " (ablated: " + ablated + ")"));
  compile::CompilePool pool(compiler_, options_.compile_jobs);

  // Reference: compiled with the same toolchain, checked against itself, quick-timed.
  compile::CompileJob reference_job;
  reference_job.backend = backend_;
  reference_job.source_name = fs::path(task_.reference_paths.at(backend_)).filename().string();
  reference_job.source = read_file(task_.reference_paths.at(backend_));
  compile::Artifact reference_artifact = pool.submit(reference_job).get();
  const std::string& reference_path = task_.reference_paths.at(backend_);
  evaluation::TaskReport task_report = with_context(
      "reference " + reference_path, [&] { return evaluator.prepare(reference_artifact); });
  for (const std::string& warning : task_report.warnings) progress_("warning: " + warning);
  copy_bytes_per_s_ = task_report.device.copy_bytes_per_s;
  if (auto peak = task_report.device.peak_flops_per_s.find("f32");
      peak != task_report.device.peak_flops_per_s.end()) {
    peak_flops_per_s_ = peak->second;
  }
  result.task_warnings = task_report.warnings;
  run_dir_.append_event({{"event", "task_prepared"},
                         {"warnings", task_report.warnings},
                         {"floor_ms", task_report.floor.floor_ms},
                         {"copy_bytes_per_s", task_report.device.copy_bytes_per_s},
                         {"seconds", task_report.seconds}});
  evaluation::TimingVerdict reference_quick = evaluator.time_reference();
  if (!reference_quick.warning.empty()) progress_("warning: " + reference_quick.warning);
  double reference_ms = reference_quick.summary.median_ms;
  progress_(fmt::format("reference on '{}': {:.4f} ms (median of {})", timed.name, reference_ms,
                        reference_quick.samples_ms.size()));

  std::optional<CandidateRecord> best;
  auto consider = [&](CandidateRecord record) {
    progress_(fmt::format("  [{:03d}] {}", record.index, describe(record, reference_ms)));
    bool accepted = record.verdict == Verdict::ok && !best;
    if (record.verdict == Verdict::ok && best &&
        *record.median_ms < *best->median_ms * (1.0 - options_.min_gain)) {
      // Looks faster on the quick rung: accepted only if a paired, interleaved comparison with
      // the best shows the gain beyond noise.
      std::optional<evaluation::PairedComparison> paired =
          evaluator.compare(handles_.at(best->id), handles_.at(record.id));
      record.acceptance = paired ? evaluation::to_string(paired->outcome) : "failed";
      accepted = paired && paired->outcome == evaluation::PairedComparison::Outcome::faster;
      progress_(fmt::format(
          "        vs best {}: {} ({:.3f}x, {:.0f}% CI [{:.3f}, {:.3f}])", best->id,
          record.acceptance, paired ? paired->speedup.speedup : 0.0,
          100 * options_.evaluation.acceptance_level, paired ? paired->speedup.ci_low : 0.0,
          paired ? paired->speedup.ci_high : 0.0));
      run_dir_.append_event({{"event", "acceptance"},
                             {"incumbent", best->id},
                             {"challenger", record.id},
                             {"outcome", record.acceptance},
                             {"speedup", paired ? paired->speedup.speedup : 0.0},
                             {"ci_low", paired ? paired->speedup.ci_low : 0.0},
                             {"ci_high", paired ? paired->speedup.ci_high : 0.0}});
    }
    if (accepted) {
      best = record;
      run_dir_.append_event({{"event", "new_best"}, {"id", record.id}, {"median_ms", *record.median_ms}});
    }
    run_dir_.append_event({{"event", "candidate"},
                           {"index", record.index},
                           {"id", record.id},
                           {"step", record.step},
                           {"verdict", to_string(record.verdict)},
                           {"median_ms", record.median_ms ? nlohmann::json(*record.median_ms)
                                                          : nlohmann::json()}});
    records_.push_back(record);
  };

  // Step 0: expert hints, built in parallel, evaluated one at a time on the worker.
  progress_("step 0: expert hints (one kernel per parallel decomposition)");
  std::vector<generation::Proposal> hints = generator_.initial_proposals();
  std::vector<std::future<compile::Artifact>> builds;
  for (const generation::Proposal& hint : hints) {
    builds.push_back(submit_screened(pool, hint, evaluator));
  }
  std::vector<compile::Artifact> hint_artifacts = collect_builds(builds);
  // Records a candidate, then tells the generator what became of it.
  auto settle = [&](const generation::Proposal& proposal, const compile::Artifact& artifact,
                    const CandidateRecord& record) {
    consider(record);
    generation::Feedback feedback;
    feedback.verdict = record.verdict;
    feedback.message = record.message;
    feedback.build_log = artifact.log;
    feedback.median_ms = record.median_ms;
    feedback.reference_ms = reference_ms;
    feedback.is_best = best && best->id == record.id;
    generator_.observe(proposal, feedback);
    return feedback;
  };
  for (size_t i = 0; i < hints.size(); ++i) {
    settle(hints[i], hint_artifacts[i], evaluate(hints[i], hint_artifacts[i], 0, evaluator));
  }

  std::mt19937_64 rng(options_.seed);
  memory::StateSummary state;
  state.context = provenance();
  state.task_name = task_.name;
  std::vector<std::string>& prefix = state.prefix;
  if (best) state.last_feedback = diagnose(*best);
  for (int step = 1; step <= options_.steps && best; ++step) {
    std::vector<const CandidateRecord*> promoted;
    for (const CandidateRecord& r : records_) {
      if (r.median_ms) promoted.push_back(&r);
    }
    std::stable_sort(promoted.begin(), promoted.end(), [](const auto* a, const auto* b) {
      return *a->median_ms < *b->median_ms;
    });
    std::vector<std::string> parents = {best->id};
    std::map<std::string, double> parent_ms = {{best->id, *best->median_ms}};
    for (const CandidateRecord* r : promoted) {
      if (parent_ms.emplace(r->id, *r->median_ms).second) parents.push_back(r->id);
    }
    if (generator_exhausted(result)) break;
    state.step = step;
    state.best_id = best->id;
    state.best_ms = *best->median_ms;
    state.best_speedup = reference_ms / *best->median_ms;
    std::vector<Move> moves = plan_step(parents, state, rng);
    if (moves.empty()) {
      progress_(fmt::format("step {}: no applicable strategy left on any correct candidate", step));
      break;
    }
    progress_(fmt::format("step {}/{}: {} candidates, best so far {} ({:.4f} ms)", step,
                          options_.steps, moves.size(), best->id, *best->median_ms));
    run_dir_.append_event({{"event", "step"}, {"step", step}, {"candidates", moves.size()},
                           {"best", best->id}});
    write_sources(moves, step);
    std::vector<std::future<compile::Artifact>> step_builds;
    for (const Move& move : moves) {
      step_builds.push_back(submit_screened(pool, move.proposal, evaluator));
    }
    std::vector<compile::Artifact> step_artifacts = collect_builds(step_builds);
    CandidateRecord last;
    auto annotate = [&](CandidateRecord& record, const Move& move) {
      record.direction_id = move.direction_id;
      record.strategy_id = move.strategy_id;
      record.parent_id = move.parent_id;
      if (record.median_ms) {
        record.log_gain = std::log(parent_ms.at(move.parent_id) / *record.median_ms);
      }
    };
    for (size_t i = 0; i < moves.size(); ++i) {
      const Move& move = moves[i];
      if (options_.explain) progress_("    why " + move.proposal.id + ": " + move.explanation);
      generation::Proposal current = move.proposal;
      compile::Artifact artifact = step_artifacts[i];
      CandidateRecord record = evaluate(current, artifact, step, evaluator);
      annotate(record, move);
      generation::Feedback feedback = settle(current, artifact, record);
      // Bounded repair loop: the failure goes back to the generator, each try a new candidate.
      for (int attempt = 1; record.verdict != Verdict::ok && attempt <= options_.repair_tries;
           ++attempt) {
        if (generator_exhausted(result)) break;
        progress_(fmt::format("        repair {}/{} of {} ({})", attempt, options_.repair_tries,
                              current.id, to_string(record.verdict)));
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
        current = std::move(*repaired);
        artifact = submit_screened(pool, current, evaluator).get();
        record = evaluate(current, artifact, step, evaluator);
        annotate(record, move);
        feedback = settle(current, artifact, record);
      }
      // One piece of evidence per move: its final outcome after any repairs.
      memory::Evidence evidence;
      evidence.direction_id = move.direction_id;
      evidence.strategy_id = move.strategy_id;
      evidence.prefix.assign(prefix.rbegin(), prefix.rend());
      evidence.provenance = provenance();
      evidence.verdict = to_string(record.verdict);
      evidence.log_gain = record.log_gain;
      if (record.median_ms) evidence.speedup_vs_baseline = reference_ms / *record.median_ms;
      evidence.candidate_id = record.artifact_key;
      evidence.excerpt = current.change;
      if (record.verdict != Verdict::ok) evidence.failure_reason = record.message.substr(0, 200);
      evidence.diagnosis = state.last_feedback.summary();
      store_.record(evidence);
      state.last_direction_id = move.direction_id;
      last = record;
    }
    for (const Move& move : moves) prefix.push_back(move.direction_id);
    // Last feedback for the next step: the verdict and gain of the latest attempt, the
    // bandwidth and roofline position of the best (the candidate the next step refines).
    memory::Diagnosis of_best = diagnose(*best);
    state.last_feedback = diagnose(last);
    state.last_feedback.bandwidth_fraction = of_best.bandwidth_fraction;
    state.last_feedback.memory_bound = of_best.memory_bound;
  }

  if (best && options_.evaluation.full_rung_candidates > 0) {
    const std::string chosen = run_full_rung(evaluator, best->id);
    for (const CandidateRecord& r : records_) {
      if (r.id == chosen) best = r;
    }
  }
  result.candidates = records_;
  result.best = best;
  result.generation_failures = generation_failures_;
  if (best) {
    progress_(fmt::format("final: timing reference and {} interleaved ({} rounds)", best->id,
                          options_.evaluation.final_rounds));
    evaluation::Evaluator::PairedSamples paired = evaluator.time_paired(handles_.at(best->id));
    if (!paired.failure.empty()) {
      throw Error("the best candidate failed during final timing: " + paired.failure);
    }
    result.reference_final = evaluation::summarize(paired.reference_ms());
    result.best_final = evaluation::summarize(paired.candidate_ms());
    result.speedup = evaluation::judge_paired(paired.reference_rounds, paired.candidate_rounds,
                                              options_.evaluation.acceptance_level,
                                              options_.evaluation.min_gain,
                                              options_.evaluation.gate.base_seed)
                         .speedup;
    run_dir_.append_event({{"event", "final"},
                           {"best", best->id},
                           {"reference_median_ms", result.reference_final.median_ms},
                           {"best_median_ms", result.best_final.median_ms},
                           {"speedup", result.speedup.speedup}});
    if (profiler_ != nullptr) {
      progress_(fmt::format("final: profiling {} under Nsight Compute on '{}'", best->id,
                            evaluator.timed_workload().name));
      result.profile = profiler_->profile(artifacts_.at(best->id), task_,
                                          evaluator.timed_workload());
      run_dir_.append_event({{"event", "profile"}, {"best", best->id},
                             {"profile", result.profile->to_json()}});
      if (!result.profile->ok) progress_("final: no profile: " + result.profile->message);
    }
    std::string extension = backend_ == "cuda" ? ".cu" : ".cpp";
    run_dir_.write_text("best" + extension, generator_.standalone_source(proposals_.at(best->id)));
    result.best_source_path = (run_dir_.path() / ("best" + extension)).string();
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

std::string Optimizer::run_full_rung(evaluation::Evaluator& evaluator, const std::string& best_id) {
  std::vector<CandidateRecord*> ranked;
  for (CandidateRecord& r : records_) {
    if (r.verdict == Verdict::ok && r.median_ms && handles_.count(r.id) && r.id != best_id) {
      ranked.push_back(&r);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const CandidateRecord* a,
                                                    const CandidateRecord* b) {
    return *a->median_ms < *b->median_ms;
  });
  for (CandidateRecord& r : records_) {
    if (r.id == best_id) ranked.insert(ranked.begin(), &r);
  }
  ranked.resize(std::min<size_t>(ranked.size(),
                                 static_cast<size_t>(options_.evaluation.full_rung_candidates)));
  std::string chosen = best_id;
  double chosen_geomean = 0.0;
  for (CandidateRecord* record : ranked) {
    progress_(fmt::format("rung 2: {} on every timed workload", record->id));
    const evaluation::FullRung full = evaluator.full_rung(handles_.at(record->id));
    nlohmann::json workloads = nlohmann::json::array();
    for (const evaluation::FullRung::Entry& e : full.workloads) {
      workloads.push_back({{"workload", e.workload},
                           {"median_ms", e.candidate.summary.median_ms},
                           {"reference_median_ms", e.reference_median_ms},
                           {"speedup", e.speedup}});
    }
    const nlohmann::json rung = {{"event", "full_rung"},
                                 {"candidate", record->id},
                                 {"verdict", to_string(full.verdict)},
                                 {"message", full.message},
                                 {"geomean_speedup", full.geomean_speedup},
                                 {"workloads", workloads}};
    run_dir_.append_event(rung);
    // Next to the candidate's evaluation.json (rungs 0-1): its history of rungs.
    run_dir_.write_json(fs::path(record->source_file).parent_path() / "full_rung.json", rung);
    if (full.verdict != Verdict::ok) {
      progress_(fmt::format("  {}: {}", to_string(full.verdict), full.message));
      continue;
    }
    record->full_geomean_speedup = full.geomean_speedup;
    progress_(fmt::format("  geomean speedup {:.3f}x over {} workload(s)", full.geomean_speedup,
                          full.workloads.size()));
    // The best comes first; another replaces it only when clearly faster over all workloads,
    // or when the best itself failed here.
    if (chosen_geomean == 0.0 ||
        full.geomean_speedup > chosen_geomean * (1.0 + options_.evaluation.min_gain)) {
      if (record->id != chosen) {
        progress_(fmt::format("  {} replaces {} for the final rung", record->id, chosen));
      }
      chosen = record->id;
      chosen_geomean = full.geomean_speedup;
    }
  }
  return chosen;
}

nlohmann::json OptimizeResult::to_json() const {
  auto record_json = [](const CandidateRecord& r) {
    nlohmann::json j = {{"index", r.index},         {"step", r.step},
                        {"id", r.id},               {"parent", r.parent_id},
                        {"change", r.change},       {"direction", r.direction_id},
                        {"strategy", r.strategy_id}, {"verdict", to_string(r.verdict)},
                        {"message", r.message},     {"artifact_key", r.artifact_key},
                        {"compile_s", r.compile_s}, {"source", r.source_file}};
    j["median_ms"] = r.median_ms ? nlohmann::json(*r.median_ms) : nlohmann::json();
    j["log_gain"] = r.log_gain ? nlohmann::json(*r.log_gain) : nlohmann::json();
    j["acceptance"] = r.acceptance;
    j["full_geomean_speedup"] =
        r.full_geomean_speedup ? nlohmann::json(*r.full_geomean_speedup) : nlohmann::json();
    return j;
  };
  nlohmann::json j;
  j["run_dir"] = run_dir;
  j["backend"] = backend;
  j["device"] = device;
  j["toolchain"] = toolchain;
  j["wall_s"] = wall_s;
  j["bytes_moved"] = bytes_moved;
  j["task_warnings"] = task_warnings;
  j["flops"] = flops ? nlohmann::json(*flops) : nlohmann::json();
  j["generation_failures"] = generation_failures;
  j["stopped_early"] = stopped_early;
  j["candidates"] = nlohmann::json::array();
  for (const CandidateRecord& r : candidates) j["candidates"].push_back(record_json(r));
  if (best) {
    double seconds = best_final.median_ms * 1e-3;
    j["best"] = record_json(*best);
    j["best"]["source"] = best_source_path;
    j["final"] = {{"reference", reference_final},
                  {"best", best_final},
                  {"speedup", speedup},
                  {"achieved_gbps", bytes_moved / seconds * 1e-9},
                  {"reference_gbps", bytes_moved / (reference_final.median_ms * 1e-3) * 1e-9}};
    if (flops) j["final"]["achieved_gflops"] = *flops / seconds * 1e-9;
  } else {
    j["best"] = nullptr;
  }
  j["profile"] = profile ? profile->to_json() : nlohmann::json();
  return j;
}

}  // namespace kforge::search

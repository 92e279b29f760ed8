#include "search/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "backends/backend.h"
#include "common/cpus.h"
#include "common/error.h"
#include "common/files.h"
#include "memory/policy.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::search {
namespace fs = std::filesystem;

namespace {

// Bumped when what a resumed run reads back (decision kinds and keys, meta) changes meaning.
// 2: per-step successive-halving promotions ("promotion" decisions), outcome values renamed.
// 3: the promotion rule covers each decomposition when there are several timed workloads, and
//    "full_rung" decisions carry workload_speedups: a run begun under 2 would continue under
//    another rule, so it is refused rather than resumed.
// 4: a step's plan reserves diversity slots for other decompositions (plan_step): a run begun
//    under 3 would plan its remaining steps under another rule.
// 5: identical candidates are recorded as duplicates and not evaluated (duplicates.h), and
//    plans carry each choice's memory support counted against meta "memory_rows_at_start":
//    a run begun under 4 would evaluate its remaining duplicates differently and has no count.
constexpr int kResumeFormat = 5;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// {"workers": 1.2, ...}: the prepare's phases for the task_prepared event, rounded to ms.
nlohmann::json phases_json(const std::vector<std::pair<std::string, double>>& phases) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, seconds] : phases) out[name] = std::round(seconds * 1000.0) / 1000.0;
  return out;
}

}  // namespace

nlohmann::json OptimizeOptions::to_json(const evaluation::EvaluationPolicy& evaluation) const {
  return {{"steps", steps},
          {"proposals_per_step", proposals_per_step},
          {"diversity_slots", diversity_slots},
          {"seed", seed},
          {"temperature", temperature},
          {"min_gain", evaluation.min_gain},
          {"repair_tries", repair_tries},
          {"policy", memory::to_string(policy)},
          {"ablations", memory::to_string(ablations)},
          {"final_rounds", evaluation.final_rounds},
          {"eta", eta},
          {"fidelity", to_string(fidelity)},
          {"budget",
           {{"max_wall_s", budget.max_wall_s ? nlohmann::json(*budget.max_wall_s) : nullptr},
            {"max_device_s", budget.max_device_s ? nlohmann::json(*budget.max_device_s) : nullptr},
            {"max_candidates",
             budget.max_candidates ? nlohmann::json(*budget.max_candidates) : nullptr},
            {"max_cost_usd",
             budget.max_cost_usd ? nlohmann::json(*budget.max_cost_usd) : nullptr}}}};
}

Optimizer::Optimizer(const Task& task, std::string backend, OptimizeOptions options,
                     memory::Store& store, generation::Generator& generator,
                     evaluation::EvaluationPlane& evaluator, compile::BuildQueue& builds,
                     std::vector<worker::Worker*> candidate_workers,
                     worker::Worker& reference_worker, report::RunDirectory& run_dir,
                     ProgressSink progress, memory::StrategySelector* selector)
    : task_(task),
      backend_(std::move(backend)),
      options_(std::move(options)),
      store_(store),
      generator_(generator),
      evaluator_(evaluator),
      builds_(builds),
      workers_(std::move(candidate_workers)),
      reference_worker_(reference_worker),
      run_dir_(run_dir),
      progress_(std::move(progress)),
      selector_(selector),
      now_s_(steady_seconds),
      phases_([this] { return now_s_(); }, "search") {}

Optimizer::~Optimizer() = default;

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

memory::Diagnosis Optimizer::diagnose(const CandidateRecord& record) const {
  return memory::diagnose(to_string(record.verdict), record.log_gain, record.median_ms,
                          static_cast<double>(result_.bytes_moved), result_.flops,
                          copy_bytes_per_s_, peak_flops_per_s_);
}

void Optimizer::open_journal() {
  const fs::path path = run_dir_.path() / "run.sqlite";
  journal_ = std::make_unique<RunJournal>(path, options_.resume);
  const nlohmann::json options = options_.to_json(evaluation_policy());
  if (!options_.resume) {
    if (!journal_->database().candidates().empty()) {
      throw Error(path.string() + " already records candidates: continue it with --resume");
    }
    journal_->set_meta("task", task_.name);
    journal_->set_meta("task_hash", task_hash_);
    journal_->set_meta("backend", backend_);
    journal_->set_meta("device", device_.name);
    journal_->set_meta("toolchain", toolchain_);
    journal_->set_meta("seed", options_.seed);
    journal_->set_meta("options", options);
    journal_->set_meta("generator", generator_.name());
    journal_->set_meta("kforge_version", KFORGE_VERSION);
    journal_->set_meta("schema_version", report::RunDatabase::kSchemaVersion);
    journal_->set_meta("resume_format", kResumeFormat);
    journal_->set_meta("sessions", 1);
    // What the memory held before this run wrote to it: a choice's support counts these rows
    // as earlier runs' evidence (memory/support.h).
    prior_evidence_rows_ = store_.evidence(backend_).size();
    journal_->set_meta("memory_rows_at_start", prior_evidence_rows_);
  } else {
    // Everything the replay depends on must be what was recorded.
    auto expect = [&](const std::string& key, const nlohmann::json& now, const std::string& what) {
      const std::optional<nlohmann::json> recorded = journal_->meta(key);
      if (!recorded) throw Error(path.string() + ": meta '" + key + "' missing (not a run to resume)");
      if (*recorded != now) {
        throw Error(fmt::format("cannot resume {}: it was recorded with {} {}, this run has {}",
                                run_dir_.path().string(), what, recorded->dump(), now.dump()));
      }
    };
    expect("resume_format", kResumeFormat, "resume format");
    expect("task_hash", task_hash_, "task hash (another task, or the task file changed)");
    expect("backend", backend_, "backend");
    expect("device", device_.name, "device");
    expect("toolchain", toolchain_, "toolchain");
    nlohmann::json recorded_options = journal_->meta("options").value_or(nlohmann::json());
    nlohmann::json now = options;
    recorded_options.erase("budget");  // limits may be raised on resume
    now.erase("budget");
    if (recorded_options != now) {
      throw Error(fmt::format("cannot resume {}: it was recorded with options {}, this run has {}",
                              run_dir_.path().string(), recorded_options.dump(), now.dump()));
    }
    journal_->set_meta("sessions", journal_->meta("sessions").value_or(1).get<int>() + 1);
    prior_evidence_rows_ =
        journal_->meta("memory_rows_at_start").value_or(nlohmann::json(0)).get<size_t>();
  }
  journal_->set_meta("status", "running");
}

void Optimizer::prepare_reference() {
  // Reference: compiled with the same toolchain (or, for a PyTorch problem, the derived task the
  // torch reference worker loads), checked against itself, quick-timed.
  compile::Artifact reference_artifact;
  std::string reference_path;
  if (task_.has_torch_reference()) {
    reference_path = task_.reference_paths.at("torch");
    run_dir_.write_json("reference.torch.json", derived_json(task_));
    reference_artifact.path = (run_dir_.path() / "reference.torch.json").string();
    reference_artifact.key = task_hash(task_);
  } else {
    reference_path = task_.reference_paths.at(backend_);
    compile::CompileJob reference_job;
    reference_job.backend = backend_;
    reference_job.source_name = fs::path(reference_path).filename().string();
    reference_job.source = read_file(reference_path);
    reference_artifact = builds_.submit(reference_job).get();
  }
  evaluation::TaskReport task_report = with_context(
      "reference " + reference_path, [&] { return evaluator_.prepare(reference_artifact); });
  const std::optional<compile::Artifact> fp32_model = evaluation::fp32_model_artifact(
      task_, backend_,
      [&](const compile::CompileJob& job) { return builds_.submit(job).get(); },
      run_dir_.path().string());
  if (fp32_model) {
    with_context("reference " + reference_path,
                 [&] { evaluator_.load_fp32_model(*fp32_model); });
  }
  for (const std::string& warning : task_report.warnings) progress_("warning: " + warning);
  copy_bytes_per_s_ = task_report.device.copy_bytes_per_s;
  if (auto peak = task_report.device.peak_flops_per_s.find("f32");
      peak != task_report.device.peak_flops_per_s.end()) {
    peak_flops_per_s_ = peak->second;
  }
  result_.task_warnings = task_report.warnings;
  if (options_.compile_baseline.source != CompileBaselinePlan::Source::none) {
    result_.compile_baseline = start_compile_baseline(options_.compile_baseline, task_report.compile);
    describe_compile_baseline(*result_.compile_baseline);
  }
  run_dir_.append_event({{"event", "task_prepared"},
                         {"warnings", task_report.warnings},
                         {"floor_ms", task_report.floor.floor_ms},
                         {"copy_bytes_per_s", task_report.device.copy_bytes_per_s},
                         {"seconds", task_report.seconds},
                         {"phases", phases_json(task_report.phases)}});
  const Workload& timed = evaluator_.timed_workload();
  if (std::optional<ReferenceTiming> recorded = journal_->replay().reference()) {
    // Resume: the numbers the recorded decisions were made with (prompts, policy state).
    reference_ms_ = recorded->quick_median_ms;
    copy_bytes_per_s_ = recorded->copy_bytes_per_s;
    peak_flops_per_s_ = recorded->peak_flops_per_s;
    progress_(fmt::format("reference on '{}': {:.4f} ms (recorded)", timed.name, reference_ms_));
    return;
  }
  evaluation::TimingVerdict reference_quick = evaluator_.time_reference();
  if (!reference_quick.warning.empty()) progress_("warning: " + reference_quick.warning);
  reference_ms_ = reference_quick.summary.median_ms;
  journal_->record_reference({reference_ms_, copy_bytes_per_s_, peak_flops_per_s_});
  run_dir_.append_event({{"event", "reference_timed"},
                         {"workload", timed.name},
                         {"median_ms", reference_ms_},
                         {"samples_ms", reference_quick.samples_ms}});
  progress_(fmt::format("reference on '{}': {:.4f} ms (median of {})", timed.name, reference_ms_,
                        reference_quick.samples_ms.size()));
}

void Optimizer::describe_compile_baseline(const CompileBaselineResult& compile) {
  switch (compile.status) {
    case CompileBaselineStatus::measured:
      progress_(fmt::format("torch.compile of the reference: compiled in {:.1f} s, {:.4f} ms on "
                            "'{}'; timed again with the best at the final rung",
                            compile.compile_s, compile.probe_median_ms,
                            evaluator_.timed_workload().name));
      return;
    case CompileBaselineStatus::cached:
      progress_(fmt::format("torch.compile of the reference: {:.3f}x faster than eager, cached "
                            "from {} (run {}); not compiled in this run",
                            compile.cached->over_eager.speedup, compile.cached->measured_at,
                            compile.cached->run_dir));
      return;
    case CompileBaselineStatus::failed:
      // A failed probe is among the task's warnings already.
      if (compile.cached) progress_("warning: no torch.compile baseline: " + compile.message);
      return;
    case CompileBaselineStatus::not_applicable:
      progress_("note: " + compile.message);
      return;
  }
}

bool Optimizer::should_stop(bool generator_boundary) {
  if (result_.stopped_by != StopReason::none) return true;
  const BudgetSpend spend = budget_->spend();
  journal_->set_meta("spent", {{"wall_s", spend.wall_s}, {"cost_usd", spend.cost_usd}});
  StopReason reason = StopReason::none;
  std::string detail;
  if (interrupts() > 0) {
    reason = StopReason::interrupted;
    detail = "interrupted (Ctrl-C)";
  } else if (reason = budget_->exceeded(); reason == StopReason::max_cost_usd) {
    detail = fmt::format("LLM budget reached: ${:.4f} spent of ${:.4f} (--max-cost-usd)",
                         spend.cost_usd, *options_.budget.max_cost_usd);
  } else if (reason != StopReason::none) {
    detail = "budget " + to_string(reason) + " reached (" + budget_->describe() + ")";
  } else if (generator_boundary) {
    detail = generator_.exhausted();
    if (!detail.empty()) reason = StopReason::generator;
  }
  if (reason == StopReason::none) return false;
  stop(reason, detail);
  return true;
}

void Optimizer::stop(StopReason reason, const std::string& detail) {
  result_.stopped_by = reason;
  result_.stopped_early = detail;
  if (!detail.empty()) progress_("stopping the search: " + detail);
  run_dir_.append_event({{"event", "stopped"}, {"reason", detail}, {"by", to_string(reason)}});
  const std::string key = fmt::format("{}@{}", to_string(reason), records_.size());
  journal_->decide(state_.step, "stopped", key,
                   {{"by", to_string(reason)}, {"candidates", records_.size()}});
}

double Optimizer::quick_reference_ms(const CandidateRecord& record) const {
  return record.quick_reference ? record.quick_reference->median_ms : reference_ms_;
}

double Optimizer::quick_speedup(const CandidateRecord& record) const {
  if (!record.median_ms || *record.median_ms <= 0.0) return 0.0;
  return quick_reference_ms(record) / *record.median_ms;
}

double Optimizer::quick_score_of(const CandidateRecord& record, bool upper) const {
  const double level = evaluation_policy().acceptance_level;
  if (!record.quick_reference) {
    return upper ? quick_score_upper(record.quick_samples_ms, reference_ms_, level)
                 : quick_score(record.quick_samples_ms, reference_ms_, level);
  }
  const std::vector<double> reference = record.quick_reference->samples_ms();
  return upper ? quick_score_upper(record.quick_samples_ms, reference, level)
               : quick_score(record.quick_samples_ms, reference, level);
}

std::array<int, kRungCount> Optimizer::rung_occupancy() const {
  std::array<int, kRungCount> occupancy = {0, 0, 0, 0};
  for (const CandidateRecord& r : records_) {
    // A duplicate reached no rung itself (its original did).
    if (r.duplicate_of.empty()) ++occupancy[static_cast<size_t>(rung_number(r.rung))];
  }
  return occupancy;
}

void Optimizer::progress_line(const std::string& where) {
  const std::string best =
      best_ ? fmt::format("{:.2f}x ({})", quick_speedup(*best_), best_->id) : "none";
  const std::array<int, kRungCount> rungs = rung_occupancy();
  progress_(fmt::format("progress: {} | {} candidates evaluated | rungs 0:{} 1:{} 2:{} 3:{} | "
                        "best {} | budget: {}",
                        where, records_.size(), rungs[0], rungs[1], rungs[2], rungs[3], best,
                        budget_->describe()));
}

void Optimizer::note_recorded_runs() {
  const std::vector<memory::RecordedRun> runs = store_.runs(task_hash_);
  if (runs.empty()) return;
  const memory::RecordedRun* fastest = nullptr;
  int correct = 0;
  for (const memory::RecordedRun& run : runs) {
    const memory::RecordedCandidate& c = run.candidates.front();
    if (c.verdict != "ok" || !c.speedup) continue;
    ++correct;
    if (fastest == nullptr || *c.speedup > *fastest->candidates.front().speedup) fastest = &run;
  }
  nlohmann::json event = {{"event", "recorded_runs"}, {"count", runs.size()}, {"correct", correct}};
  std::string line = fmt::format(
      "memory: {} kernel(s) of this task evaluated with kforge eval --record, {} correct",
      runs.size(), correct);
  if (fastest != nullptr) {
    const memory::RecordedCandidate& c = fastest->candidates.front();
    line += fmt::format("; the fastest {:.3f}x over the reference ({} on {}, {})", *c.speedup,
                        c.source_name, fastest->provenance.device, fastest->created_at);
    event["fastest"] = memory::to_json(*fastest);
    event["fastest"]["candidates"][0].erase("source");  // the memory keeps it; the log need not
  }
  progress_(line);
  run_dir_.append_event(event);
}

OptimizeResult Optimizer::run() {
  const double entered_s = now_s_();
  result_ = OptimizeResult{};
  result_.run_dir = run_dir_.path().string();
  result_.backend = backend_;
  start_hint_builds();  // cuda: nvcc runs while the reference worker starts and prepares
  // The reference worker's hello carries the measured copy bandwidth and FMA rate.
  device_ = reference_worker_.device_info();
  toolchain_ = builds_.toolchain(backend_);
  task_hash_ = task_hash(task_);
  result_.device = device_;
  result_.toolchain = toolchain_;
  result_.precision = evaluation::fp32_rule_applies(task_, backend_) ? "fp32 (precision rule)"
                                                                     : task_.precision;
  progress_(fmt::format("device: {} ({}), toolchain: {}", device_.name,
                        backends::get_backend(backend_).can.compute_capability
                            ? "sm " + device_.compute_capability
                            : backend_,
                        toolchain_));
  open_journal();
  const BudgetSpend prior = journal_->replay().spent();  // earlier sessions' wall time and cost
  validate_eta(options_.eta);
  result_.fidelity = to_string(options_.fidelity);
  result_.eta = options_.eta;
  if (options_.policy == memory::PolicyKind::oneshot) {
    options_.steps = std::min(options_.steps, 1);
    options_.proposals_per_step = 1;
  }
  budget_ = std::make_unique<BudgetTracker>(options_.steps, options_.budget, now_s_, cost_usd_,
                                            prior);
  result_.startup_s = now_s_() - entered_s;  // the reference worker's start, mostly
  phases_.start();
  run_dir_.append_event({{"event", options_.resume ? "run_resumed" : "run_started"},
                         {"task", task_.name},
                         {"backend", backend_},
                         {"device", device_.name},
                         {"toolchain", toolchain_},
                         {"seed", options_.seed}});
  note_recorded_runs();
  // Every worker of the pool must start before the run does (a missing device stops it here).
  for (size_t w = 1; w < workers_.size(); ++w) workers_.at(w).device_info();
  if (workers_.size() > 1) {
    progress_(fmt::format("worker pool: {} candidate workers, one candidate each at a time",
                          workers_.size()));
  }
  const Workload& timed = evaluator_.timed_workload();
  result_.bytes_moved = min_bytes_moved(task_.signature, timed);
  result_.flops = flops_per_call(task_, timed);
  memory::PolicyConfig policy_config;
  policy_config.temperature = options_.temperature;
  policy_config.ablations = options_.ablations;
  policy_config.weights = options_.provenance_weights;
  policy_ = memory::make_search_policy(options_.policy, store_, policy_config, selector_);
  evidence_reads_ =
      memory::evidence_reads(options_.policy, options_.ablations, policy_config.prefix_length);
  const std::string ablated = memory::to_string(options_.ablations);
  progress_(fmt::format("policy: {}{}", policy_->name(),
                        ablated.empty() ? "" : " (ablated: " + ablated + ")"));
  {
    auto phase = phases_.enter("prepare");
    prepare_reference();
  }

  run_hints();
  promote_cohort(0);
  run_steps();
  promote_cohort(state_.step);  // whatever a stop left undecided
  progress_line("search done");

  auto final_phase = phases_.enter("final");
  if (best_ && interrupts() < 2) {
    const std::string chosen = choose_final(best_->id);
    best_ = *find_record(chosen);
  } else if (best_) {
    result_.final_skipped = true;
  }
  result_.generation_failures = generation_failures_;
  if (best_) {
    run_final();
    if (!result_.final_skipped) find_record(best_->id)->rung = Rung::final;
    best_ = *find_record(best_->id);
  }
  sync_duplicates();
  result_.candidates = records_;
  result_.best = best_;
  result_.lineage = best_lineage();
  result_.rung_occupancy = rung_occupancy();
  progress_line("done");
  result_.interrupted = interrupts() > 0;
  result_.budget = budget_->to_json();
  result_.budget["stopped_by"] = to_string(result_.stopped_by);
  result_.wall_s = budget_->spend().wall_s;
  result_.phases_s = phases_.seconds();
  const BudgetSpend spend = budget_->spend();
  journal_->set_meta("spent", {{"wall_s", spend.wall_s}, {"cost_usd", spend.cost_usd}});
  journal_->set_meta("status", result_.interrupted ? "interrupted" : "finished");
  return result_;
}

RealPlane make_real_plane(const Task& task, const std::string& backend,
                          const OptimizeOptions& options, evaluation::EvaluationPolicy policy,
                          compile::Compiler& compiler,
                          const std::vector<worker::Worker*>& candidate_workers,
                          worker::Worker& reference_worker) {
  if (options.fidelity == Fidelity::full) policy.quick = policy.full;
  // The ladder checks the timed workloads' outputs when a candidate reaches a rung that
  // decides (EvaluationPolicy::defer_timed_gate); full fidelity checks every candidate there
  // at rung 0, as `kforge eval` does.
  policy.defer_timed_gate = options.fidelity == Fidelity::ladder;
  RealPlane plane;
  plane.evaluator = std::make_unique<evaluation::Evaluator>(*candidate_workers.at(0),
                                                            reference_worker, task, policy);
  // Where builds overlap timings (cuda) with a worker pool (Optimizer::evaluate_batch), the
  // compile pool leaves a core to each worker's launching thread and one to the orchestrator,
  // so that the host-clock cross-check of a timing is not inflated by compilers.
  int compile_jobs = options.compile_jobs;
  if (compile_jobs == 0 && backends::get_backend(backend).can.builds_overlap_timing &&
      candidate_workers.size() > 1) {
    const int cores = usable_cpus();
    compile_jobs = std::max(1, cores - static_cast<int>(candidate_workers.size()) - 1);
  }
  plane.pool = std::make_unique<compile::CompilePool>(compiler, compile_jobs);
  return plane;
}

}  // namespace kforge::search

// The optimization loop of one run: HTAM's step-by-step evolution over a generator (templates
// or llm), gated and timed by the evaluation plane, bounded by a budget, recorded as it happens
// in the run database so that it can be resumed.
//
//   step 0   expert hints: every parallel decomposition at its default parameters (coarse cover);
//            with the llm generator the task's native reference, or (none: a PyTorch problem)
//            a first kernel the model writes from the reference, repaired like a step's move
//            and never written to the memory (no direction or strategy produced it)
//   step t   the policy picks (direction, strategy) pairs applicable to the current best (and,
//            in diversity_slots of the step's proposals, to the fastest candidate of another
//            parallel decomposition); the generator turns each into a candidate; the compile pool builds them in parallel;
//            each is gated and quick-timed in rounds between short rounds of the reference (its
//            quick speedup is over the reference timed in its own window, so that a load
//            that comes and goes during the run does not decide rung 1: QuickReference, issue
//            21); a failed one goes back to the generator for up to
//            repair_tries repairs; a candidate that looks faster becomes the new best only
//            when a paired comparison shows the gain beyond noise. The search stops at the
//            first candidate boundary where the budget (budget.h) is spent, Ctrl-C was
//            pressed, or the generator is exhausted.
//   promote  after each step (and after the hints), the step's correct candidates compete for
//            rung 2 by successive halving (scheduler.h: the top ceil(n / eta) by S(p, 1), a
//            lower confidence bound of the quick speedup, plus the best); the promoted run rung
//            2 at once (every timed workload, the full measurement policy), the rest are
//            pruned. Then each move's feedback is written back into the HTG: its log gain over
//            its parent (quick rung) and its speedup, from rung 2 when it was promoted.
//   final    rung 3 takes the best by rung-2 geomean (the search's best unless another is
//            faster by more than min_gain over every timed workload and confirms it when both
//            are timed in interleaved rounds on every timed workload); it and the reference are
//            timed interleaved (paired rounds) and the speedup is reported with a bootstrap
//            confidence interval; a second Ctrl-C skips it
//
// Why rung 2 runs per step and not once at the end: a promoted candidate's full-rung result is
// the best evidence the run has about it, so it goes into the memory update of the step that
// made it (the issue: "a promoted candidate's feedback goes to the memory update") and orders
// the next step's parents (the best first, then rung-2 candidates by geomean, then the pruned
// by quick median); a candidate fast on the quick workload but slow on the others stops being
// refined a step later, not after the whole budget. The cost: rung 2 spends on candidates that
// a later step would have outclassed; successive halving bounds it to about 1/eta of them.
// Under --fidelity full (the flat baseline of bench/ladder) rung 1 uses the full measurement
// policy and every correct candidate gets rung 2. Under the ladder the gate's timed-workload
// cases wait until a candidate first reaches a deciding rung (passes_gate_at_full_size before it
// becomes the best or is compared; the plane runs them before rungs 2 and 3 itself):
// EvaluationPolicy::defer_timed_gate says why.
//
// Resume (`options.resume`, `kforge optimize --resume`): the loop runs again from the start with
// the same seed and options, and every thing that would be measured or chosen again is read back
// from the run database instead, so the same decisions follow. The decision sites ask one
// ReplayJournal (run_journal.h), one question per kind of decision; on a fresh run it answers
// "not recorded" to all of them:
//   - a candidate with a row is restored from it (verdict, medians, build log) without being
//     compiled or timed; its worker handle is obtained only when needed (an acceptance
//     comparison with a new challenger, rung 2, the final rung) by compiling it again, which the
//     artifact cache answers, and loading it, without re-timing;
//   - the reference's start-of-run quick median and the device's measured bandwidth and FMA
//     rate come from the run's meta (prompts, the policy's state and the diagnoses depend on
//     them); each candidate's rung-1 window reference comes from its row (a row recorded
//     before windows existed has none, and the start-of-run median stands in, as it did then);
//   - each step's moves (parent, direction, strategy) and the rng state after planning come from
//     the recorded `plan`: the memory store has changed since (this run's own evidence, maybe
//     other runs'), so asking the policy again could choose differently;
//   - acceptance comparisons, promotions (the quick samples they were scored from are in the
//     candidate's row) and rung-2 results already decided are replayed, not re-measured;
//   - memory evidence already written for a move is not written again (the `evidence` decision
//     is written before the store's row, so a crash between the two loses that row instead of
//     duplicating it);
//   - a worker pool (any size) replays the same way: nothing recorded depends on which worker
//     ran what;
//   - budget: replayed candidates count again with their recorded device seconds (rung 2's
//     too); wall time and LLM cost add to what earlier sessions recorded.
// Limits: the device, the toolchain and the task must be the ones recorded (checked; an Error
// names the difference). With --generator llm, a step replays its source requests through the
// transcript cache; a request whose prompt changed goes to the model again. The final rung is
// always measured again (it was either never reached or is what the resume must redo).
//
// Decision code talks only to seams (Store, Generator, the evaluation plane, the build queue,
// Worker), so tests run it with fakes; make_real_plane() builds the real evaluation plane and
// compile pool that `kforge optimize` passes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compile_pool.h"
#include "compile/compiler.h"
#include "core/ladder.h"
#include "evaluation/evaluator.h"
#include "evaluation/profiler.h"
#include "generation/generator.h"
#include "memory/baselines.h"
#include "memory/policy.h"
#include "memory/store.h"
#include "memory/support.h"
#include "report/run_directory.h"
#include "search/budget.h"
#include "search/compile_baseline.h"
#include "search/decisions.h"
#include "search/lineage.h"
#include "search/optimize_types.h"
#include "search/phase_clock.h"
#include "search/run_journal.h"
#include "search/scheduler.h"
#include "search/worker_pool.h"
#include "core/task.h"
#include "worker/worker.h"

namespace kforge::search {

class Optimizer {
 public:
  /// A run of `task` on `backend` that measures through `evaluator` (its policy() is the run's
  /// evaluation policy) and builds through `builds`, with a pool of candidate workers
  /// (worker_pool.h: one per device, or N cpu processes; at least one) and the reference's
  /// worker. None is owned; make_real_plane() builds the real evaluator and compile pool over
  /// the same workers. A batch (the hints, a step's planned candidates, a step's promoted
  /// candidates' rung 2) is evaluated concurrently, one candidate per worker; the results are
  /// then applied in the plan's order, so the run is the one a single worker with the same
  /// timings gives. Repairs, acceptance comparisons and the final rung run one at a time (a
  /// comparison on the challenger's worker, the incumbent loaded there too).
  Optimizer(const Task& task, std::string backend, OptimizeOptions options, memory::Store& store,
            generation::Generator& generator, evaluation::EvaluationPlane& evaluator,
            compile::BuildQueue& builds, std::vector<worker::Worker*> candidate_workers,
            worker::Worker& reference_worker, report::RunDirectory& run_dir,
            ProgressSink progress, memory::StrategySelector* selector = nullptr);
  ~Optimizer();

  /// Runs the loop. Candidate failures are recorded, never thrown; throws Error only when the
  /// harness or the task is broken (reference does not compile or fails against itself), or, on
  /// resume, when the run database does not belong to this task, device or toolchain, or the
  /// replay diverges from what it recorded.
  OptimizeResult run();

  /// Profiles the best candidate at the final rung (Nsight Compute on cuda); null = no profiling.
  /// Keeps a reference.
  void set_profiler(evaluation::Profiler* profiler) { profiler_ = profiler; }
  /// Counts Ctrl-C presses (a signal handler increments it): 1 stops the search at the next
  /// candidate boundary, 2 also skips rungs 2 and 3. Keeps a reference; null: never.
  void set_interrupts(const std::atomic<int>* interrupts) { interrupts_ = interrupts; }
  /// The LLM cost spent so far in this session, in USD (for the max_cost_usd limit).
  void set_cost_meter(std::function<double()> cost_usd) { cost_usd_ = std::move(cost_usd); }
  /// Monotonic seconds for the wall-time limit (tests pass a fake). Default: steady_clock.
  void set_clock(std::function<double()> now_s) { now_s_ = std::move(now_s); }

 private:
  struct Move;
  // optimizer.cpp: setup, stops, progress
  void open_journal();
  void prepare_reference();
  /// One progress line on the torch.compile baseline as prepare() left it.
  void describe_compile_baseline(const CompileBaselineResult& compile);
  /// True (after recording why) when the search must stop before the next candidate: Ctrl-C,
  /// a spent budget, or (at a `generator_boundary`: a step's start, before a repair) an
  /// exhausted generator.
  bool should_stop(bool generator_boundary = false);
  void stop(StopReason reason, const std::string& detail);
  // Says what the memory holds of this task beyond the HTG's evidence: the kernels evaluated
  // with `kforge eval --record` (count and the fastest correct one), as a progress line and a
  // "recorded_runs" event. Nothing when there are none.
  void note_recorded_runs();
  void progress_line(const std::string& where);
  /// The reference median `record`'s rung-1 numbers are over: its window's
  /// (CandidateRecord::quick_reference), else the run's start-of-run one (reference_ms_), in ms.
  double quick_reference_ms(const CandidateRecord& record) const;
  /// quick_reference_ms(record) over its quick median: its rung-1 speedup; 0 without a median.
  /// What every rung-1 comparison of two candidates uses (the acceptance pre-check, the
  /// parents' order, a move's log gain), so that two candidates timed under different loads
  /// are compared through their own windows' references.
  double quick_speedup(const CandidateRecord& record) const;
  /// S(p, 1) of `record` (scheduler.h), or with `upper` the upper end of its quick speedup's
  /// interval: over the reference samples of its window, else over reference_ms_.
  double quick_score_of(const CandidateRecord& record, bool upper = false) const;
  /// Candidates at each highest rung reached, by rung number.
  std::array<int, kRungCount> rung_occupancy() const;
  /// The run's evaluation policy: the evaluation plane's.
  const evaluation::EvaluationPolicy& evaluation_policy() const { return evaluator_.policy(); }
  int interrupts() const { return interrupts_ != nullptr ? interrupts_->load() : 0; }
  memory::Provenance provenance() const;
  memory::Diagnosis diagnose(const CandidateRecord& record) const;

  // optimizer_loop.cpp: the expert hints, the steps and their planning
  /// Step 0's builds, started when run() starts where builds overlap timings (cuda): the hints
  /// compile while the reference worker starts (a PyTorch reference: importing torch), computes
  /// the expected outputs and times the reference, instead of after it. Only hints that come
  /// written (the built-in kernels); a generator that writes its first kernel from the reference
  /// waits for it. The journal is not open yet: a resumed run's replayed hints are built too
  /// (the artifact cache answers) and dropped by run_hints.
  void start_hint_builds();
  void run_hints();
  /// Starts the builds of `hints` (none for a candidate the journal replays or a duplicate of an
  /// earlier hint of the batch): one future per hint, invalid where none started.
  std::vector<std::shared_future<compile::Artifact>> submit_hint_builds(
      const std::vector<generation::Proposal>& hints);
  /// Has the generator write the hints it planned without a source (the llm generator's first
  /// kernel for a task with no native reference); one it could not write is a generation
  /// failure, reported and dropped from `hints`. Returns the ids of the hints it was asked to
  /// write: they get repair turns like a step's moves.
  std::set<std::string> write_hints(std::vector<generation::Proposal>& hints);
  /// Bounded repair loop after `record` (the outcome of `current`) failed: the failure goes back
  /// to the generator, each try a new candidate, up to repair_tries or the first correct one.
  /// Updates `current`, `record` and `feedback` to the last try.
  void repair_until_ok(generation::Proposal& current, CandidateRecord& record,
                       generation::Feedback& feedback, int step, const Move* move);
  void run_steps();
  /// The next step's parents in the order the planner tries them, with their quick speedups
  /// (quick_speedup).
  std::pair<std::vector<std::string>, std::map<std::string, double>> parents_in_order() const;
  std::vector<Move> plan_step(const std::vector<std::string>& parents,
                              const std::map<std::string, double>& parent_speedup, int step);
  std::vector<Move> replay_plan(const PlanDecision& plan,
                                const std::map<std::string, double>& parent_speedup);
  void write_sources(std::vector<Move>& moves, int step);
  /// Runs one step's moves (each with its repairs and its memory evidence).
  void run_moves(std::vector<Move>& moves, int step);

  // optimizer_candidate.cpp: one candidate's life
  /// A candidate built and through rungs 0-1 on worker `worker`, not yet recorded.
  struct Evaluated {
    compile::Artifact artifact;
    evaluation::CandidateEvaluation outcome;
    size_t worker = 0;
  };
  std::future<compile::Artifact> submit_screened(const generation::Proposal& proposal);
  /// Builds (`build`) and evaluates one candidate on worker 0.
  Evaluated evaluate_now(const std::function<compile::Artifact()>& build);
  /// Evaluates the batch's unrecorded candidates concurrently on the pool (more than one
  /// worker; else nothing: attempt() evaluates them one at a time). `builds[i]` yields
  /// candidate i's artifact; on cpu every build has finished before the first timing starts
  /// (compilers would share the cores with the timed kernel), on cuda a worker starts a
  /// candidate as soon as its own build is done (the compile pool leaves the workers' host
  /// threads a core each; see make_real_plane()). Stops starting new ones on Ctrl-C or when the
  /// candidate budget would be exceeded.
  std::vector<std::optional<Evaluated>> evaluate_batch(
      const std::vector<const generation::Proposal*>& proposals,
      std::vector<std::shared_future<compile::Artifact>>& builds);
  /// Candidate i's evaluation from the batch, or (not run there) evaluated now on worker 0.
  std::function<Evaluated()> evaluated_or_now(
      std::vector<std::optional<Evaluated>>& evaluated,
      std::vector<std::shared_future<compile::Artifact>>& builds, size_t i,
      const generation::Proposal& proposal);
  /// One candidate: restored from the journal when recorded, else recorded as a duplicate of
  /// an earlier candidate when it is one (duplicates.h), else evaluated (`obtain`) and
  /// recorded; then judged against the best and reported to the generator.
  CandidateRecord attempt(const generation::Proposal& proposal,
                          const std::function<Evaluated()>& obtain, int step, const Move* move,
                          generation::Feedback* feedback);
  CandidateRecord record_evaluation(const generation::Proposal& proposal,
                                    const Evaluated& evaluated, int step, const Move* move);
  /// A record of `proposal` as the next candidate of `step`: index, step, id, parent, change.
  CandidateRecord new_record(const generation::Proposal& proposal, int step) const;
  /// Sets `record`'s direction, strategy and parent from `move` (none for a hint), and its
  /// log gain over the move's parent where it has a quick median: ln of its quick speedup over
  /// the parent's (each over its own window's reference; with one reference for both, ln of
  /// the parent's median over its median).
  void take_move(CandidateRecord& record, const Move* move) const;
  /// Writes the proposal's standalone source into its candidate folder `dir` as
  /// source<extension> and sets record.source_file to it.
  void write_source(const generation::Proposal& proposal, const std::filesystem::path& dir,
                    CandidateRecord& record);
  CandidateRecord restore(const generation::Proposal& proposal,
                          const RecordedCandidate& recorded);

  // optimizer_duplicates.cpp: identical candidates evaluated once (duplicates.h)
  /// The recorded candidate that `proposal` repeats (same duplicate key), or null.
  const CandidateRecord* original_of(const generation::Proposal& proposal) const;
  /// Whether a batch's `proposal` needs no build: it repeats a recorded candidate or one
  /// earlier in the batch (whose keys `batch_keys` collects; the proposal's is added).
  bool batch_duplicate(const generation::Proposal& proposal, std::set<std::string>& batch_keys);
  /// Records `proposal` as the same program as `original`: its row (duplicate_of, the
  /// original's verdict and quick numbers, no rung rows), its folder (source, evaluation.json),
  /// no worker call.
  CandidateRecord record_duplicate(const generation::Proposal& proposal,
                                   const CandidateRecord& original, int step, const Move* move);
  /// Remembers `record`'s duplicate key when it is an original (evaluated or restored).
  void remember_original(const generation::Proposal& proposal, const CandidateRecord& record);
  /// Copies to every duplicate what its original learned since (a later rejection, rung 2).
  void sync_duplicates();
  /// The lineage of the best (lineage.h) from the run's records.
  std::vector<LineageStep> best_lineage() const;

  // optimizer_acceptance.cpp: a candidate judged against the best
  /// Judges `record` against the best (the acceptance outcome; a new best when accepted),
  /// records the outcome and appends the record.
  void consider(CandidateRecord& record);
  /// The paired comparison of `record`, which looked faster on the quick rung, with the best:
  /// replayed when recorded, else measured on the challenger's worker and recorded.
  AcceptanceDecision compare_with_best(const CandidateRecord& record);
  /// `challenger` timed interleaved with `incumbent` on the challenger's worker (compare()),
  /// its seconds charged to the budget and recorded as a "compare" rung row of the challenger,
  /// and an event `event_name` written. Not journalled as a decision: the callers do that.
  AcceptanceDecision compare_paired(const CandidateRecord& incumbent,
                                    const CandidateRecord& challenger,
                                    const std::string& event_name);
  /// Gives candidate `id` `verdict` after a check of a later rung failed (wrong_answer or
  /// rejected_by_policy from a checked call; any verdict from the deferred gate at full size):
  /// its row in the run database, its record and an event say so.
  void reject_after_check(const std::string& id, Verdict verdict, const std::string& message);
  /// The gate's timed-workload cases for `record` when the plane deferred them from rung 0
  /// (EvaluationPolicy::defer_timed_gate), before it becomes the best without a comparison or
  /// is compared with the best; its seconds are charged to the budget and an event records a
  /// run. False, with the candidate rejected under the gate's verdict, when it fails.
  bool passes_gate_at_full_size(CandidateRecord& record);

  // optimizer_candidate.cpp, continued
  void record_evidence(const Move& move, const CandidateRecord& record, int step, size_t slot);
  CandidateRecord* find_record(const std::string& id);
  /// The handle of a correct candidate on worker `worker`, loading it there (on resume, after
  /// compiling it again from the cache) when this session has not. Thread-safe for distinct
  /// workers.
  int handle_on(const std::string& id, size_t worker);
  /// The worker that evaluated `id` in this session (0 for a candidate restored on resume).
  size_t home_of(const std::string& id);

  // final_rung.cpp: the promotion, rungs 2 and 3
  /// Decides every undecided correct candidate (the cohort of `step`) by successive halving,
  /// records each decision (kind "promotion"; replayed on resume), and runs rung 2 on the
  /// promoted in the cohort's order. A second Ctrl-C skips it (final_skipped).
  void promote_cohort(int step);
  /// The template variant of candidate `id` (its parallel decomposition); empty for LLM
  /// candidates and unknown ids.
  std::string decomposition_of(const std::string& id) const;
  /// Rung 2 of `record` (or its recorded result on resume; or `measured`, run by the pool):
  /// records it, sets full_geomean_speedup when it passed, rung = 2, and adds its seconds to
  /// the device budget.
  struct FullMeasured {
    evaluation::FullRung full;
    double seconds = 0.0;
  };
  void run_full_rung(CandidateRecord& record, const std::optional<FullMeasured>& measured = {});
  /// The id the final rung takes: `best_id` unless another rung-2 candidate's geomean speedup
  /// over all timed workloads is higher by more than min_gain (or the best failed rung 2).
  std::string choose_final(const std::string& best_id);
  /// A rung-2 challenger of the search's best, timed with it as acceptance times two
  /// candidates (EvaluationPlane::compare_on: compare_rounds interleaved rounds, the order
  /// alternating, checked calls), once on every timed workload; `speedup` the geometric mean of
  /// the workloads' paired speedups (challenger over best), ci_low/ci_high its interval
  /// (evaluation::geometric_mean), the outcome judge_speedup's at min_gain: faster, slower or
  /// tie; failed when a timing of either fails. Until the identical-code run of
  /// bench/ladder/identical_cpu.md it timed two full rungs of each in ABBA order and took the
  /// two ratios for the interval: with a load noise far above min_gain, both ratios fall on the
  /// same side of 1 +- min_gain about one time in four each way for identical code. The seconds
  /// are charged to the budget and recorded as a "compare" rung row of the challenger; an event
  /// "final_challenge" is written.
  AcceptanceDecision confirm_full_rung(const CandidateRecord& best,
                                       const CandidateRecord& challenger);
  /// Rung 3 on best_: paired timing with the reference, the profile, best.cpp|cu|py.
  void run_final();
  /// The file extension of `proposal`'s source: ".py" for a ModelNew module (its job's
  /// source_name ends in .py), else the backend's (".cpp", ".cu").
  std::string source_extension_of(const generation::Proposal& proposal) const;

  const Task& task_;
  std::string backend_;
  OptimizeOptions options_;
  memory::Store& store_;
  generation::Generator& generator_;
  evaluation::EvaluationPlane& evaluator_;  // gates and times; owns the evaluation policy
  compile::BuildQueue& builds_;
  WorkerPool workers_;                // run candidates (worker 0: the evaluator's default)
  worker::Worker& reference_worker_;  // runs only the reference (the evaluation's oracle)
  report::RunDirectory& run_dir_;
  ProgressSink progress_;
  memory::StrategySelector* selector_;  // null: UCB1
  evaluation::Profiler* profiler_ = nullptr;
  const std::atomic<int>* interrupts_ = nullptr;
  std::function<double()> cost_usd_;
  std::function<double()> now_s_;
  /// Where run()'s wall time goes (result.json phases_s); counts from run()'s start, on now_s_.
  PhaseClock phases_;

  // State of one run().
  worker::DeviceInfo device_;
  std::string toolchain_;
  std::string task_hash_;
  std::unique_ptr<memory::SearchPolicy> policy_;
  std::unique_ptr<RunJournal> journal_;
  std::unique_ptr<BudgetTracker> budget_;
  OptimizeResult result_;
  double reference_ms_ = 0.0;       // the reference's quick-rung median at the run's start
  double copy_bytes_per_s_ = 0.0;   // measured by the reference worker (plausibility floor)
  double peak_flops_per_s_ = 0.0;   // f32 peak when the device reports one
  std::optional<CandidateRecord> best_;
  memory::StateSummary state_;
  std::mt19937_64 rng_;
  std::vector<CandidateRecord> records_;
  std::mutex handles_mutex_;  // guards handles_, homes_, artifacts_ (the pool's threads load)
  std::map<std::string, std::map<size_t, int>> handles_;  // id -> worker index -> handle
  std::map<std::string, size_t> homes_;                    // id -> worker that evaluated it
  std::map<std::string, compile::Artifact> artifacts_;  // candidate id -> its build
  std::map<std::string, generation::Proposal> proposals_;  // every candidate tried, by id
  int generation_failures_ = 0;
  bool first_written_by_generator_ = false;  // step 0's kernels came from the generator
  /// start_hint_builds()'s hints and their builds, taken by run_hints().
  std::optional<std::pair<std::vector<generation::Proposal>,
                          std::vector<std::shared_future<compile::Artifact>>>>
      early_hints_;
  std::map<std::string, std::string> originals_;  // duplicate key -> first candidate's id
  /// Evidence rows of the backend in the store when the run started (meta
  /// "memory_rows_at_start"): the rows a choice's support counts as prior (memory/support.h).
  size_t prior_evidence_rows_ = 0;
  memory::EvidenceReads evidence_reads_;  // what the run's policy reads
};

/// The real evaluation plane and compile pool of a run, as `kforge optimize` runs them.
struct RealPlane {
  std::unique_ptr<evaluation::Evaluator> evaluator;
  std::unique_ptr<compile::CompilePool> pool;
};

/// Builds the real evaluator over `candidate_workers` (the first is its default candidate
/// worker) and `reference_worker` with `policy`, under --fidelity full with the full rung's
/// measurement at rung 1 too, under the ladder with the timed workloads' gate cases deferred
/// (EvaluationPolicy::defer_timed_gate); and the compile pool over `compiler`,
/// options.compile_jobs deep (0: the hardware threads; on cuda with several candidate workers,
/// builds overlap timings, so it leaves a core to each worker's launching thread and one to the
/// orchestrator, so that the host-clock cross-check of a timing is not inflated by compilers).
/// Throws Error when the task has no timed workload.
RealPlane make_real_plane(const Task& task, const std::string& backend,
                          const OptimizeOptions& options, evaluation::EvaluationPolicy policy,
                          compile::Compiler& compiler,
                          const std::vector<worker::Worker*>& candidate_workers,
                          worker::Worker& reference_worker);

}  // namespace kforge::search

// What a run of the optimization loop takes and gives (search/optimizer.h runs it): its
// options, each evaluated candidate's record, and the run's result, as the run directory's
// result.json, the reports and the suite read them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/ladder.h"
#include "core/task.h"
#include "evaluation/evaluator.h"
#include "evaluation/profiler.h"
#include "memory/baselines.h"
#include "memory/policy.h"
#include "memory/support.h"
#include "search/budget.h"
#include "search/compile_baseline.h"
#include "search/decisions.h"
#include "search/lineage.h"
#include "search/scheduler.h"
#include "worker/worker.h"

namespace kforge::search {

struct OptimizeOptions {
  int steps = 6;                  // T, as in HTAM's published setting
  int proposals_per_step = 3;     // candidates generated per step
  /// Of a step's proposals, how many (at most proposals_per_step - 1) refine the fastest
  /// candidate of another parallel decomposition than the best's instead of the best (plan_step;
  /// the niching of evolutionary search). 0: every slot goes to the best first.
  int diversity_slots = 1;
  uint64_t seed = 1;              // policy sampling; same seed, same decisions
  double temperature = 0.5;       // softmax temperature of the direction choice
  int compile_jobs = 0;           // compile pool depth; 0 = hardware threads (make_real_plane)
  bool explain = false;           // print why each candidate was chosen, promoted, pruned, rejected
  // A failed step candidate goes back to the generator (compile errors, wrong-answer details)
  // at most this many times; generators that cannot repair (templates) decline at once.
  int repair_tries = 2;
  /// Which policy picks the moves (memory/baselines.h); oneshot also limits the run to one step
  /// of one candidate after the expert hints.
  memory::PolicyKind policy = memory::PolicyKind::htam;
  memory::Ablations ablations;          // htam only
  memory::ProvenanceWeights provenance_weights;
  /// Successive-halving ratio (scheduler.h): the top ceil(n / eta) of a step's correct
  /// candidates reach rung 2. Must be > 1 (validate_eta); 3 as in Hyperband's default.
  double eta = 3.0;
  /// ladder: as above; full: full measurement policy at rung 1, rung 2 for every correct one.
  Fidelity fidelity = Fidelity::ladder;
  BudgetLimits budget;                  // besides `steps`
  /// Continue the run recorded in the run directory's run.sqlite (see the header comment).
  bool resume = false;
  /// --baseline compile: measure torch.compile of the reference (the evaluation policy's
  /// baseline is then compile too), or take the baseline cache's entry (compile_baseline.h).
  CompileBaselinePlan compile_baseline;
  /// The options that decide the search, for the run database's meta, with the two knobs of
  /// the run's evaluation policy that the meta has always carried (min_gain: a candidate
  /// replaces the best only if faster by more than it; final_rounds).
  nlohmann::json to_json(const evaluation::EvaluationPolicy& evaluation) const;
};

/// One evaluated candidate, as recorded in the run directory.
struct CandidateRecord {
  int index = 0;
  int step = 0;
  std::string id;
  std::string parent_id;
  std::string change;
  std::string direction_id;       // empty for expert hints
  std::string strategy_id;
  Verdict verdict = Verdict::ok;
  std::string message;
  std::string artifact_key;
  bool from_cache = false;
  double compile_s = 0.0;
  std::optional<double> median_ms;
  /// The paired comparison with the best, when it looked faster on the quick rung.
  std::optional<ComparisonOutcome> acceptance;
  std::optional<double> log_gain;  // ln(parent median / this median)
  std::string source_file;         // path of the candidate's standalone source in the run dir
  /// Rung 2: geomean speedup over the reference across every timed workload, when it ran.
  std::optional<double> full_geomean_speedup;
  /// Rung 2 per timed workload: (workload name, speedup over the reference), in task order.
  std::vector<std::pair<std::string, double>> full_workloads;
  std::string build_log;           // the compiler's output (feedback for repairs)
  double device_s = 0.0;           // candidate-worker seconds its gate and quick rungs took
  bool replayed = false;           // restored from the run database on resume
  /// S(p, 1): lower confidence bound of the quick-rung speedup (scheduler.h), over the
  /// reference timed in its own window; 0 if not timed.
  double quick_score = 0.0;
  std::vector<double> quick_samples_ms;  // the quick rung's samples (the score's input)
  /// The reference timed in rounds interleaved with its quick timing (QuickReference): every
  /// rung-1 speedup of the candidate is over its median. Empty for a run recorded before it
  /// and for a plane that times none: the run's start-of-run reference median stands in.
  std::optional<evaluation::QuickReference> quick_reference;
  /// The scheduler's decision (promoted to rung 2, or pruned); none when not correct or not
  /// decided yet.
  std::optional<PromotionOutcome> promotion;
  /// Highest rung reached (gate also when the build failed).
  Rung rung = Rung::gate;
  /// Budget spent (device seconds, wall seconds; budget.h) when this candidate's rung 1 ended,
  /// or under the ladder its deferred gate at full size if it ran then (before it became the
  /// best or was compared): for the final best, the cost of finding it. On resume, wall time
  /// is the replay's.
  double found_device_s = 0.0;
  double found_wall_s = 0.0;
  /// Set when the candidate is the same program as an earlier one (duplicates.h: normalized
  /// source, defines, backend): that candidate's id. A duplicate is not built, gated or timed
  /// (device_s 0); it carries the original's verdict and numbers, is never a new best, never
  /// promoted, never a parent, and writes no memory evidence (Optimizer::attempt).
  std::string duplicate_of;
  int duplicate_of_index = -1;  // the original's index, for "same as #N"
  /// Why the policy chose this candidate's (direction, strategy), recorded at decision time
  /// (memory/support.h); none for expert hints and runs recorded before it was kept.
  std::optional<memory::ChoiceSupport> support;
};

/// What a run produced.
struct OptimizeResult {
  std::string run_dir;
  std::string backend;
  worker::DeviceInfo device;
  std::string toolchain;
  /// The accuracy the outputs were held to (Task::precision) and whether the fp32 precision rule
  /// applied ("fp32" with an fp32 model): "fp32 (precision rule)", "fp32", "tf32", "bf16".
  std::string precision;
  std::vector<CandidateRecord> candidates;
  std::optional<CandidateRecord> best;
  evaluation::SampleSummary reference_final;
  evaluation::SampleSummary best_final;
  /// The final rung's raw samples in ms, one list per interleaved round, in the order they were
  /// timed: reference_final and best_final summarize them flattened. Empty when the final rung
  /// did not run. result.json keeps them (final.reference_rounds_ms, final.best_rounds_ms) for
  /// the report's timing distribution (report/run_html.cpp).
  std::vector<std::vector<double>> reference_final_rounds_ms;
  std::vector<std::vector<double>> best_final_rounds_ms;
  evaluation::SpeedupEstimate speedup;   // paired over the final rounds
  std::vector<std::string> task_warnings;  // weak-task findings of the self-test
  int64_t bytes_moved = 0;
  std::optional<double> flops;
  double wall_s = 0.0;
  std::string best_source_path;
  /// The final rung's hardware profile of the best candidate, when a profiler was set.
  std::optional<evaluation::ProfileReport> profile;
  int generation_failures = 0;     // planned candidates the generator could not write
  std::string stopped_early;       // why the search stopped before its steps, in words
  StopReason stopped_by = StopReason::none;
  nlohmann::json budget;           // BudgetTracker::to_json() plus "stopped_by"
  bool interrupted = false;        // Ctrl-C stopped the search (the run can be resumed)
  bool final_skipped = false;      // a second Ctrl-C skipped rungs 2-3: no final numbers
  int replayed_candidates = 0;     // restored from the run database on resume
  /// Candidates per highest rung reached (0 gate, 1 quick, 2 full, 3 final).
  std::array<int, kRungCount> rung_occupancy = {0, 0, 0, 0};
  std::string fidelity = "ladder";
  double eta = 3.0;
  /// --baseline compile: the torch.compile baseline (its speedup over it at rung 3, its compile
  /// time, or why there is none); nullopt under --baseline eager.
  std::optional<CompileBaselineResult> compile_baseline;
  /// The best's lineage, from its expert hint to it (lineage.h); empty without a best.
  std::vector<LineageStep> lineage;
  /// Wall seconds of this session's run() by phase, disjoint, summing to its wall time
  /// (phase_clock.h): "prepare" (the reference's expected outputs, self-test, timing,
  /// baselines), "compile_wait" (the orchestrator waiting for candidate builds), "search"
  /// (candidate evaluation plus the search's bookkeeping), "final" (the final choice and rung),
  /// "profile" (Nsight Compute).
  std::map<std::string, double> phases_s;
  /// Wall seconds before the run's budget clock started: run()'s own start (the reference
  /// worker's start) plus, added by `kforge optimize`, the process's time before run() (task
  /// load, the candidate workers' start, probes).
  double startup_s = 0.0;
  nlohmann::json to_json() const;
};

/// Receives progress lines (the CLI prints them; tests collect them).
using ProgressSink = std::function<void(const std::string& line)>;

}  // namespace kforge::search

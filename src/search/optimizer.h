// The optimization loop of one run (first version): HTAM's step-by-step evolution over a
// generator (templates or llm), gated and timed by the evaluation plane.
//
//   step 0   expert hints: every parallel decomposition at its default parameters (coarse cover)
//   step t   the policy picks (direction, strategy) pairs applicable to the current best; the
//            generator turns each into a candidate; the compile pool builds them in parallel;
//            each is gated and quick-timed; a failed one goes back to the generator for up to
//            repair_tries repairs; the feedback (log gain over its parent) is written back
//            into the HTG; a faster candidate becomes the new best. The search stops early
//            when the generator is exhausted (LLM budget spent, Ctrl-C).
//   final    the best and the reference are timed interleaved (paired rounds) and the speedup is
//            reported with a bootstrap confidence interval
//
// Decision code talks only to seams (Store, Generator, Compiler, Worker), so tests run it with
// fakes. The full budget-aware multi-fidelity scheduler is a later issue.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "compile/compile_pool.h"
#include "evaluation/evaluator.h"
#include "evaluation/profiler.h"
#include "generation/generator.h"
#include "memory/policy.h"
#include "memory/baselines.h"
#include "memory/store.h"
#include "report/run_directory.h"
#include "task/task.h"
#include "worker/worker.h"

namespace kforge::search {

struct OptimizeOptions {
  int steps = 6;                  // T, as in HTAM's published setting
  int proposals_per_step = 3;     // candidates generated per step
  uint64_t seed = 1;              // policy sampling; same seed, same decisions
  double temperature = 0.5;       // softmax temperature of the direction choice
  int compile_jobs = 0;           // compile pool depth; 0 = hardware threads
  double min_gain = 0.01;         // a candidate replaces the best only if >= 1% faster (noise)
  bool explain = false;           // print why each direction/strategy was chosen
  // A failed step candidate goes back to the generator (compile errors, wrong-answer details)
  // at most this many times; generators that cannot repair (templates) decline at once.
  int repair_tries = 2;
  /// Which policy picks the moves (memory/baselines.h); oneshot also limits the run to one step
  /// of one candidate after the expert hints.
  memory::PolicyKind policy = memory::PolicyKind::htam;
  memory::Ablations ablations;          // htam only
  memory::ProvenanceWeights provenance_weights;
  evaluation::EvaluationPolicy evaluation;
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
  std::string acceptance;          // vs the best when it looked faster: faster/slower/tie
  std::optional<double> log_gain;  // ln(parent median / this median)
  std::string source_file;         // path of the candidate's standalone source in the run dir
  /// Rung 2: geomean speedup over the reference across every timed workload, when it ran.
  std::optional<double> full_geomean_speedup;
};

/// What a run produced.
struct OptimizeResult {
  std::string run_dir;
  std::string backend;
  worker::DeviceInfo device;
  std::string toolchain;
  std::vector<CandidateRecord> candidates;
  std::optional<CandidateRecord> best;
  evaluation::SampleSummary reference_final;
  evaluation::SampleSummary best_final;
  evaluation::SpeedupEstimate speedup;   // paired over the final rounds
  std::vector<std::string> task_warnings;  // weak-task findings of the self-test
  int64_t bytes_moved = 0;
  std::optional<double> flops;
  double wall_s = 0.0;
  std::string best_source_path;
  /// The final rung's hardware profile of the best candidate, when a profiler was set.
  std::optional<evaluation::ProfileReport> profile;
  int generation_failures = 0;     // planned candidates the generator could not write
  std::string stopped_early;       // why the search stopped before its steps (budget, Ctrl-C)
  nlohmann::json to_json() const;
};

/// Receives progress lines (the CLI prints them; tests collect them).
using ProgressSink = std::function<void(const std::string& line)>;

class Optimizer {
 public:
  Optimizer(const Task& task, std::string backend, OptimizeOptions options, memory::Store& store,
            generation::Generator& generator, compile::Compiler& compiler,
            worker::Worker& candidate_worker, worker::Worker& reference_worker,
            report::RunDirectory& run_dir, ProgressSink progress,
            memory::StrategySelector* selector = nullptr);

  /// Runs the loop. Candidate failures are recorded, never thrown; throws Error only when the
  /// harness or the task is broken (reference does not compile or fails against itself).
  OptimizeResult run();

  /// Profiles the best candidate at the final rung (Nsight Compute on cuda); null = no profiling.
  /// Keeps a reference.
  void set_profiler(evaluation::Profiler* profiler) { profiler_ = profiler; }

 private:
  struct Move;
  /// Up to proposals_per_step (parent, direction, strategy, proposal) moves; `parents` are
  /// correct candidates' ids, fastest first; `prefix` the directions chosen so far.
  std::vector<Move> plan_step(const std::vector<std::string>& parents,
                              const memory::StateSummary& state, std::mt19937_64& rng);
  /// The diagnosis of one evaluated candidate (bandwidth from the timed workload's bytes).
  memory::Diagnosis diagnose(const CandidateRecord& record) const;
  /// Gates and times one compiled proposal; writes its record and event.
  CandidateRecord evaluate(const generation::Proposal& proposal, const compile::Artifact& artifact,
                           int step, evaluation::Evaluator& evaluator);
  memory::Provenance provenance() const;
  /// Rung 2 on the fastest correct candidates (EvaluationPolicy::full_rung_candidates); returns
  /// the id of the one the final rung takes: `best_id` unless another's geomean speedup over
  /// all timed workloads is higher by more than min_gain.
  std::string run_full_rung(evaluation::Evaluator& evaluator, const std::string& best_id);
  /// Waits for every build of a batch, in order (so no compile overlaps the batch's timings).
  std::vector<compile::Artifact> collect_builds(
      std::vector<std::future<compile::Artifact>>& builds) const;
  /// Screens the proposal's source with the task's static policy, then submits it to `pool`;
  /// a rejected source is never compiled (its artifact carries rejected_by_policy).
  std::future<compile::Artifact> submit_screened(compile::CompilePool& pool,
                                                 const generation::Proposal& proposal,
                                                 const evaluation::Evaluator& evaluator);
  /// Asks the generator to write the moves' sources; drops (and logs) the ones it could not.
  void write_sources(std::vector<Move>& moves, int step);
  /// True (after saying why) when the generator can write nothing more.
  bool generator_exhausted(OptimizeResult& result);

  const Task& task_;
  std::string backend_;
  OptimizeOptions options_;
  memory::Store& store_;
  generation::Generator& generator_;
  compile::Compiler& compiler_;
  worker::Worker& worker_;            // runs candidates
  worker::Worker& reference_worker_;  // runs only the reference (the evaluation's oracle)
  report::RunDirectory& run_dir_;
  ProgressSink progress_;
  memory::StrategySelector* selector_;  // null: UCB1
  worker::DeviceInfo device_;
  std::string toolchain_;
  std::string task_hash_;
  std::unique_ptr<memory::SearchPolicy> policy_;
  double copy_bytes_per_s_ = 0.0;   // measured by the reference worker (plausibility floor)
  double peak_flops_per_s_ = 0.0;   // f32 peak when the device reports one
  int64_t bytes_moved_ = 0;
  std::optional<double> flops_;
  std::vector<CandidateRecord> records_;
  std::map<std::string, int> handles_;   // candidate id -> worker handle
  std::map<std::string, compile::Artifact> artifacts_;  // candidate id -> its build
  evaluation::Profiler* profiler_ = nullptr;
  std::map<std::string, generation::Proposal> proposals_;  // every candidate tried, by id
  int generation_failures_ = 0;
};

}  // namespace kforge::search

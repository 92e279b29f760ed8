// The optimization loop of one run (first version): HTAM's step-by-step evolution over the
// templates generator, gated and timed by the evaluation plane.
//
//   step 0   expert hints: every parallel decomposition at its default parameters (coarse cover)
//   step t   the policy picks (direction, strategy) pairs applicable to the current best; the
//            generator turns each into a candidate; the compile pool builds them in parallel;
//            each is gated and quick-timed; the feedback (log gain over its parent) is written
//            back into the HTG; a faster candidate becomes the new best
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
#include "generation/generator.h"
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
  nlohmann::json to_json() const;
};

/// Receives progress lines (the CLI prints them; tests collect them).
using ProgressSink = std::function<void(const std::string& line)>;

class Optimizer {
 public:
  Optimizer(const Task& task, std::string backend, OptimizeOptions options, memory::Store& store,
            generation::Generator& generator, compile::Compiler& compiler,
            worker::Worker& candidate_worker, worker::Worker& reference_worker,
            report::RunDirectory& run_dir, ProgressSink progress);

  /// Runs the loop. Candidate failures are recorded, never thrown; throws Error only when the
  /// harness or the task is broken (reference does not compile or fails against itself).
  OptimizeResult run();

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
  /// Waits for every build of a batch, in order (so no compile overlaps the batch's timings).
  std::vector<compile::Artifact> collect_builds(
      std::vector<std::future<compile::Artifact>>& builds) const;
  /// Screens the proposal's source with the task's static policy, then submits it to `pool`;
  /// a rejected source is never compiled (its artifact carries rejected_by_policy).
  std::future<compile::Artifact> submit_screened(compile::CompilePool& pool,
                                                 const generation::Proposal& proposal,
                                                 const evaluation::Evaluator& evaluator);

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
  std::map<std::string, generation::Proposal> proposals_;  // every candidate tried, by id
};

}  // namespace kforge::search

// One optimize run over a measured space (space.h) through the replay plane (replay_plane.h),
// and what the experiments of issue 21 read from it: the best-so-far curve of the run's best
// (at its recorded, noise-free rung-2 speedup) against device seconds and candidates, the cost of
// reaching the final best, and the area under the curve.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "search/scheduler.h"
#include "core/task.h"
#include "generation/kernel_family.h"
#include "memory/baselines.h"
#include "memory/store.h"
#include "simulation/space.h"

namespace kforge::simulation {

/// One arm of an experiment: the policy and its ablations, and the fidelity schedule.
struct Arm {
  std::string name;                                 // e.g. "htam", "flat", "htam-prefix"
  memory::PolicyKind policy = memory::PolicyKind::htam;
  memory::Ablations ablations;
  search::Fidelity fidelity = search::Fidelity::ladder;
};

/// Parses "htam", "flat", "feedback", "random", "oneshot", "htam-<ablation>[-<ablation>]"
/// (prefix, hierarchy, local-memory) and a "full:" prefix for full fidelity ("full:htam").
/// Throws Error naming the arm and the forms it takes.
Arm parse_arm(const std::string& name);

/// Swaps each template parameter's default (values[0], where a decomposition's expert hint
/// starts) with one of its values drawn with `seed` (values[0] itself included), in `params` and
/// every `params_by_dtype` list; the value sets are unchanged (SimulatedRunOptions::cold_defaults).
void randomize_defaults(generation::KernelFamily& family, uint64_t seed);

/// The best-so-far curve at one moment: after `candidates` candidates and `device_s` device
/// seconds, the run's best is `speedup` (its space record's rung-2 geomean; 1.0 before any best:
/// the user still has the reference).
struct CurvePoint {
  double device_s = 0.0;
  int candidates = 0;
  double speedup = 1.0;
};

/// What one simulated run gave.
struct RunOutcome {
  std::string task;
  std::string arm;
  uint64_t seed = 0;
  int candidates = 0;              // evaluated (duplicates not counted)
  double device_s = 0.0;           // all the plane charged, rungs 0-3 and comparisons
  double search_device_s = 0.0;    // the run's budget tracker's device seconds (rungs 0-2)
  double final_speedup = 1.0;      // true (recorded) rung-2 speedup of the run's final best
  double space_best_speedup = 1.0; // the best point of the whole space
  std::string best_id;             // the run's final best, or "" without one
  /// Candidates and device seconds until the run's best was within 2% of its final best
  /// (issue 21's "time to the best").
  int candidates_to_best = 0;
  double device_s_to_best = 0.0;
  std::vector<CurvePoint> curve;   // each change of the run's best, in order
};

/// How to run it.
struct SimulatedRunOptions {
  Arm arm;
  uint64_t seed = 1;               // the policy's and the noise's
  int steps = 6;
  std::filesystem::path scratch;   // the run directory goes under it (created, then removed)
  /// Where the family's family.toml is read (kernels/<backend>/<family>/); "" = kforge's own.
  std::filesystem::path kernels_root;
  /// Ablation: before the run, each template parameter's default (its first value, where the
  /// expert hints start: one hint per decomposition at its defaults) is swapped with a value
  /// drawn with `seed`, so the hints start at random points of each decomposition instead of the
  /// family's tuned defaults. Shows what the search and the memory add where the defaults are
  /// not already near the best (on the H200's element-wise and GEMV spaces they are within 1%).
  bool cold_defaults = false;
  /// The ladder's successive-halving ratio (search::OptimizeOptions::eta, scheduler.h): the top
  /// ceil(n / eta) of a cohort go on to rung 2. Must be > 1.
  double eta = 3.0;
  /// Candidates generated per step (search::OptimizeOptions::proposals_per_step): a step's
  /// proposals are the ladder's cohort.
  int proposals_per_step = 3;
};

/// Runs `task` (the space's task) through search::Optimizer with a ReplayPlane, ReplayBuilds
/// and idle workers, recording evidence into `store` as a real run does (so a later run on the
/// same store transfers it). Throws Error when the space does not fit the task (another task
/// hash, a point the family produces that the space lacks) or the run fails.
RunOutcome simulate_run(const Task& task, const SpaceRecord& space, memory::Store& store,
                        const SimulatedRunOptions& options);

/// Mean best-so-far speedup over [0, horizon_s] device seconds (the area under the curve divided
/// by the horizon); the last value holds past the run's end. horizon_s > 0.
double curve_area(const std::vector<CurvePoint>& curve, double horizon_s);

}  // namespace kforge::simulation

// A task's whole built-in search space measured once (issue 21): every variant x parameter point
// of its kernel family built, gated (rung 0), quick-timed (rung 1) and, when correct, timed at
// rung 2 on every timed workload, with the raw samples and the seconds each rung took. The
// policy, transfer and ladder experiments replay these records (replay_plane.h) instead of a
// device, as kernel_tuner's simulation runner replays its cache files (Kernel Tuner,
// van Werkhoven et al., FGCS 2019; "simulation mode" of its documentation).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "core/verdict.h"
#include "generation/kernel_family.h"

namespace kforge::simulation {

/// Rung 2 of one point on one timed workload: the candidate's raw samples (ms) and the
/// reference's median on the same workload (ms).
struct WorkloadTiming {
  std::string workload;
  std::vector<double> samples_ms;
  double reference_median_ms = 0.0;
};

/// One point of the space as measured.
struct PointRecord {
  std::string id;                           // TemplatePoint::id(), e.g. "row_simd[ACCUMULATORS=4]"
  std::string job_key;                      // job_key() of its build: how a replay finds it
  std::string variant;
  std::string decomposition;
  std::map<std::string, std::string> params;
  Verdict verdict = Verdict::ok;            // of the build, rung 0 or rung 1 (first failure)
  std::string message;                      // why it failed
  double compile_s = 0.0;                   // the build's wall seconds (0 when cached)
  double gate_s = 0.0;                      // rung 0's seconds on the device
  /// Seconds of the gate's timed-workload cases, run apart from rung 0 in a space measured
  /// with them deferred (SpaceRecord::deferred_timed_gate; gate_at_full_size); 0 in a space
  /// measured before, whose gate_s holds them.
  double gate_full_size_s = 0.0;
  /// The point passed rungs 0-1 and failed those cases (`verdict` and `message` are theirs).
  bool gate_full_size_failed = false;
  double quick_s = 0.0;                     // rung 1's seconds
  std::vector<double> quick_samples_ms;     // rung 1's raw samples (the timed workload)
  double full_s = 0.0;                      // rung 2's seconds (0 when not run)
  std::vector<WorkloadTiming> full;         // rung 2 per timed workload, task order
  std::optional<double> full_geomean_speedup;  // over the reference, across `full`
};

/// The measured space of one task on one backend and device.
struct SpaceRecord {
  int version = 1;
  std::string task;               // the task's name
  std::string task_path;          // the task file the space was measured for
  std::string task_hash;          // task_hash() of it: a replay refuses another task
  std::string family;
  std::string backend;
  std::string dtype;              // element type of the first input ("f32", ...)
  std::string device;             // the device's name
  std::string toolchain;          // "g++ 12.2.0" / "nvcc 13.0.88"
  std::string measured_at;        // ISO 8601, UTC
  std::string commit;             // kforge's commit, when known
  std::string timed_workload;     // rung 1's workload
  std::vector<double> reference_quick_samples_ms;  // the reference's rung-1 samples
  double reference_quick_s = 0.0;                  // seconds the reference's rung 1 took
  /// Measured with EvaluationPolicy::defer_timed_gate: each point's gate_s is the gate
  /// workloads' cases, gate_full_size_s the timed workloads', and quick_s an unchecked rung 1.
  bool deferred_timed_gate = false;
  std::vector<PointRecord> points;

  /// The point whose build is `key`, or nullptr.
  const PointRecord* find(const std::string& key) const;
  /// The correct point with the highest rung-2 geomean speedup, or nullptr when none is.
  const PointRecord* best() const;
};

/// The key a replay finds a build's record by: the source's file name and the defines, sorted
/// ("row_simd.cpp;KF_ACCUMULATORS=4;KF_PARALLEL=1"). The source text is not hashed: a space
/// file records one version of the family's sources (the commit says which).
std::string job_key(const compile::CompileJob& job);

/// Every point of `family` (already restricted to one dtype: generation::for_dtype): the
/// cartesian product of each variant's parameter values, variants in family order, the
/// parameters' first values first.
std::vector<generation::TemplatePoint> all_points(const generation::KernelFamily& family);

void to_json(nlohmann::json& j, const PointRecord& p);
void from_json(const nlohmann::json& j, PointRecord& p);
void to_json(nlohmann::json& j, const SpaceRecord& s);
void from_json(const nlohmann::json& j, SpaceRecord& s);

/// Reads a space file. Throws Error naming the file when it is missing, not JSON, of another
/// version, or lacks a field.
SpaceRecord load_space(const std::string& path);
/// Writes `space` as JSON (atomically: a temporary file renamed). Throws Error on failure.
void save_space(const SpaceRecord& space, const std::string& path);

}  // namespace kforge::simulation

// `kforge optimize --baseline compile` and the baseline cache: deciding before a run what it does
// about torch.compile (search::CompileBaselinePlan), and writing what it measured afterwards.
//
// Policy (docs/torch_tasks.md "Baselines"):
//   - a PyTorch that cannot compile at all (PyTorch 1.x, Dynamo unsupported on its Python) is
//     refused up front, before the run directory is written: every number the user asked for
//     would be missing, on every problem alike;
//   - a module that fails to compile is a warning: the run goes on against eager, and the
//     failure is kept in the cache (not tried again for that key under --baseline-cache use);
//   - a compile-vs-eager ratio in the cache replaces compiling again (the best's speedup over
//     torch.compile is then this run's paired speedup over eager divided by it); the eager
//     reference itself is always timed with the best, never taken from the cache;
//   - a task whose reference is not a PyTorch module has no torch.compile baseline: a note.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/baseline.h"
#include "core/task.h"
#include "report/baseline_cache.h"
#include "search/optimizer.h"
#include "worker/protocol.h"

namespace kforge::cli {

/// The cache key of `task`'s baseline `kind` at its first timed workload on the device the
/// torch reference worker described (`reference_device`: its name and runtime_version).
/// Requires task.torch_reference (its problem_sha256). Throws Error naming the field otherwise.
report::BaselineKey baseline_key(const Task& task, const worker::DeviceInfo& reference_device,
                                 BaselineKind kind);

/// What a run of `task` does about torch.compile under `kind` and `mode`, given the cache entry
/// `cached` of baseline_key(task, ..., compile) (nullopt: none, or the cache is off). Pure: the
/// caller has refused an environment without torch.compile already.
search::CompileBaselinePlan plan_compile_baseline(BaselineKind kind, BaselineCacheMode mode,
                                                  const Task& task,
                                                  const std::optional<report::BaselineEntry>& cached);

/// The cache entries a finished run's torch.compile baseline gives (compile, then eager), keyed
/// by the caller: a measured baseline with its rung-3 ratio gives both; a fresh failure (not one
/// read from the cache) gives the compile entry with ok = false; anything else none.
struct MeasuredBaselines {
  std::optional<report::BaselineEntry> compile;
  std::optional<report::BaselineEntry> eager;
};
MeasuredBaselines measured_baselines(const search::OptimizeResult& result,
                                     const std::string& measured_at);

/// The whole of it for run_optimize, before the run directory is written: refuses `--baseline
/// compile` where this PyTorch cannot compile (Error naming the task file and why), reads the
/// cache in `cache_dir` (the artifact cache folder) for the device `reference_device` (the torch
/// reference worker's hello) and returns the plan, with notes for the user on `notes`.
search::CompileBaselinePlan prepare_compile_baseline(BaselineKind kind, BaselineCacheMode mode,
                                                     const Task& task, const std::string& task_path,
                                                     const worker::DeviceInfo& reference_device,
                                                     const std::string& cache_dir,
                                                     std::ostream& notes);

/// After the run: stores measured_baselines(result) under the run's keys unless `mode` is off
/// or nothing was measured. A cache that cannot be written is a note on `notes`, never an error
/// (the run's results are already written).
void record_baselines(BaselineCacheMode mode, const Task& task,
                      const worker::DeviceInfo& reference_device, const std::string& cache_dir,
                      const search::OptimizeResult& result, std::ostream& notes);

}  // namespace kforge::cli

#include "cli/optimize_baseline.h"

#include <filesystem>

#include "common/error.h"
#include "report/run_directory.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

search::CachedCompileBaseline cached_from(const report::BaselineEntry& entry) {
  search::CachedCompileBaseline cached;
  cached.ok = entry.ok;
  cached.message = entry.message;
  if (entry.over_eager) cached.over_eager = *entry.over_eager;
  cached.eager_median_ms = entry.eager_median_ms;
  cached.compile_median_ms = entry.median_ms;
  cached.compile_s = entry.compile_s;
  cached.measured_at = entry.measured_at;
  cached.run_dir = entry.run_dir;
  return cached;
}

report::BaselineEntry entry_of(const search::OptimizeResult& result,
                               const std::string& measured_at) {
  report::BaselineEntry entry;
  entry.measured_at = measured_at;
  entry.run_dir = result.run_dir;
  entry.kforge_version = KFORGE_VERSION;
  return entry;
}

}  // namespace

report::BaselineKey baseline_key(const Task& task, const worker::DeviceInfo& reference_device,
                                 BaselineKind kind) {
  if (!task.has_torch_reference()) {
    throw Error(task.source_path + ": baselines are cached for PyTorch problems only");
  }
  const auto sha = task.torch_reference.find("problem_sha256");
  if (sha == task.torch_reference.end() || !sha->is_string() || sha->get<std::string>().empty()) {
    throw Error(task.source_path + ": derived task: problem_sha256: missing (expected the "
                "sha256 of the problem file's bytes)");
  }
  const Workload* timed = nullptr;
  for (const Workload& workload : task.workloads) {
    if (workload.timed) {
      timed = &workload;
      break;
    }
  }
  if (timed == nullptr) throw Error(task.source_path + ": no timed workload");
  report::BaselineKey key;
  key.problem_sha256 = sha->get<std::string>();
  key.dims = nlohmann::json(timed->dims).dump();  // a std::map: keys sorted
  key.backend = reference_device.backend;
  key.device = reference_device.name;
  key.torch_version = reference_device.runtime_version;
  key.kind = kind;
  return key;
}

search::CompileBaselinePlan plan_compile_baseline(BaselineKind kind, BaselineCacheMode mode,
                                                  const Task& task,
                                                  const std::optional<report::BaselineEntry>& cached) {
  using Source = search::CompileBaselinePlan::Source;
  search::CompileBaselinePlan plan;
  if (kind == BaselineKind::eager) return plan;
  if (!task.has_torch_reference()) {
    plan.source = Source::not_applicable;
    plan.note = task.source_path + ": the reference is native code, not a PyTorch module: "
                "--baseline compile does not apply (speedups are against the reference)";
    return plan;
  }
  // An ok entry without its ratio (written by another kforge) cannot stand in for a compile.
  if (mode == BaselineCacheMode::use && cached && (!cached->ok || cached->over_eager)) {
    plan.source = Source::cache;
    plan.cached = cached_from(*cached);
    return plan;
  }
  plan.source = Source::measure;
  return plan;
}

MeasuredBaselines measured_baselines(const search::OptimizeResult& result,
                                     const std::string& measured_at) {
  MeasuredBaselines measured;
  if (!result.compile_baseline) return measured;
  const search::CompileBaselineResult& compile = *result.compile_baseline;
  if (compile.status == search::CompileBaselineStatus::measured && compile.over_eager &&
      compile.final) {
    report::BaselineEntry entry = entry_of(result, measured_at);
    entry.median_ms = compile.final->median_ms;
    entry.samples_ms = compile.compile_samples_ms;
    entry.compile_s = compile.compile_s;
    entry.over_eager = compile.over_eager;
    entry.eager_median_ms = result.reference_final.median_ms;
    measured.compile = entry;
    report::BaselineEntry eager = entry_of(result, measured_at);
    eager.median_ms = result.reference_final.median_ms;
    eager.samples_ms = compile.eager_samples_ms;
    measured.eager = eager;
  } else if (compile.status == search::CompileBaselineStatus::failed && !compile.cached) {
    report::BaselineEntry entry = entry_of(result, measured_at);
    entry.ok = false;
    entry.message = compile.message;
    entry.compile_s = compile.compile_s;
    measured.compile = entry;
  }
  return measured;
}

search::CompileBaselinePlan prepare_compile_baseline(BaselineKind kind, BaselineCacheMode mode,
                                                     const Task& task, const std::string& task_path,
                                                     const worker::DeviceInfo& reference_device,
                                                     const std::string& cache_dir,
                                                     std::ostream& notes) {
  if (kind == BaselineKind::compile && task.has_torch_reference()) {
    if (const std::string why = torch_compile_support(); !why.empty()) {
      throw Error(task_path + ": --baseline compile: " + why +
                  "; use --baseline eager (the default), or set KFORGE_PYTHON to a Python with "
                  "PyTorch 2.x");
    }
  }
  std::optional<report::BaselineEntry> cached;
  if (kind == BaselineKind::compile && task.has_torch_reference() &&
      mode == BaselineCacheMode::use) {
    const fs::path file = report::BaselineCache::file_in(cache_dir);
    try {
      cached = report::BaselineCache::open(file)->find(
          baseline_key(task, reference_device, BaselineKind::compile));
    } catch (const std::exception& e) {
      notes << "kforge: note: the baseline cache is not read (" << e.what()
            << "); torch.compile is measured in this run\n";
    }
  }
  return plan_compile_baseline(kind, mode, task, cached);
}

void record_baselines(BaselineCacheMode mode, const Task& task,
                      const worker::DeviceInfo& reference_device, const std::string& cache_dir,
                      const search::OptimizeResult& result, std::ostream& notes) {
  if (mode == BaselineCacheMode::off || !task.has_torch_reference()) return;
  const MeasuredBaselines measured = measured_baselines(result, report::utc_now_iso8601());
  if (!measured.compile && !measured.eager) return;
  try {
    std::unique_ptr<report::BaselineCache> cache =
        report::BaselineCache::open(report::BaselineCache::file_in(cache_dir));
    if (measured.compile) {
      cache->store(baseline_key(task, reference_device, BaselineKind::compile), *measured.compile);
    }
    if (measured.eager) {
      cache->store(baseline_key(task, reference_device, BaselineKind::eager), *measured.eager);
    }
  } catch (const std::exception& e) {
    notes << "kforge: note: the baseline cache was not written: " << e.what() << "\n";
  }
}

}  // namespace kforge::cli

#include "cli/reference_check.h"

#include <chrono>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/optimize_command.h"
#include "cli/worker_setup.h"
#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"
#include "common/scratch_dir.h"
#include "compile/toolchain_compiler.h"
#include "core/baseline.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

const Workload& first_timed(const Task& task) {
  for (const Workload& workload : task.workloads) {
    if (workload.timed) return workload;
  }
  throw Error(task.source_path + ": no timed workload (mark one `timed = true`)");
}

// Builds `job` with the toolchain and artifact cache the options name.
compile::Artifact compile_with_cache(const compile::CompileJob& job,
                                     const ReferenceCheckOptions& options) {
  compile::ToolchainOptions toolchain;
  toolchain.cache_dir = options.cache_dir.empty() ? artifact_cache_dir() : options.cache_dir;
  toolchain.include_dirs = kernel_include_dirs();
  toolchain.cuda_arch = options.cuda_arch;
  compile::ToolchainCompiler compiler(toolchain, &backends::toolchain_for);
  return compiler.compile(job);
}

// The artifact the reference worker loads: the derived task's JSON for a PyTorch reference (in
// `scratch`), the compiled native reference otherwise.
compile::Artifact reference_artifact(const Task& task, const std::string& backend,
                                     const ReferenceCheckOptions& options, const ScratchDir& scratch,
                                     std::string& reference) {
  compile::Artifact artifact;
  if (task.has_torch_reference()) {
    reference = task.reference_paths.at("torch");
    artifact.path = (fs::path(scratch.path()) / "reference.torch.json").string();
    write_file_atomically(artifact.path, derived_json(task).dump(2) + "\n");
    artifact.key = task_hash(task);
    return artifact;
  }
  const auto path = task.reference_paths.find(backend);
  if (path == task.reference_paths.end()) {
    throw Error(task.source_path + ": reference." + backend + ": missing (the task has no " +
                backend + " reference; choose another --backend)");
  }
  reference = path->second;
  compile::CompileJob job;
  job.backend = backend;
  job.source_name = fs::path(reference).filename().string();
  job.source = read_file(reference);
  artifact = compile_with_cache(job, options);
  if (artifact.verdict != Verdict::ok) {
    throw Error(reference + ": the reference does not compile with the " + backend +
                " toolchain:\n" + artifact.log);
  }
  return artifact;
}

}  // namespace

ReferenceWorkers::ReferenceWorkers(std::string backend, int device)
    : backend_(std::move(backend)), device_(device) {}

ReferenceWorkers::~ReferenceWorkers() {
  for (Plane* plane : {torch_plane_.get(), native_plane_.get()}) {
    if (plane == nullptr) continue;
    if (plane->router) plane->router->shutdown();
    plane->candidates->shutdown();
    plane->reference->shutdown();
  }
}

ReferenceWorkers::Plane& ReferenceWorkers::plane(const Task& task) {
  const bool torch = task.has_torch_reference();
  std::unique_ptr<Plane>& slot = torch ? torch_plane_ : native_plane_;
  if (slot) return *slot;
  auto plane = std::make_unique<Plane>();
  plane->configs = worker_configs(task, backend_, device_);
  plane->candidates = std::make_unique<worker::ProcessWorker>(plane->configs.candidate);
  plane->candidate_plane = plane->candidates.get();
  if (torch) {
    plane->python_candidates =
        std::make_unique<worker::ProcessWorker>(plane->configs.python_candidate);
    plane->router =
        std::make_unique<worker::CandidateRouter>(*plane->candidates, *plane->python_candidates);
    plane->candidate_plane = plane->router.get();
  }
  plane->reference = std::make_unique<worker::ProcessWorker>(plane->configs.reference);
  slot = std::move(plane);
  return *slot;
}

std::vector<std::string> ReferenceWorkers::release_tasks() {
  constexpr double kUnloadTimeoutS = 60.0;  // dropping a model and collecting: well under
  std::vector<std::string> problems;
  for (Plane* plane : {torch_plane_.get(), native_plane_.get()}) {
    if (plane == nullptr) continue;
    for (worker::ProcessWorker* worker :
         {plane->reference.get(), plane->candidates.get(), plane->python_candidates.get()}) {
      if (worker == nullptr) continue;
      for (const int handle : worker->loaded_handles()) {
        std::string error;
        if (!worker->unload(handle, kUnloadTimeoutS, &error)) {
          problems.push_back(fmt::format("unloading handle {}: {}", handle, error));
        }
      }
    }
  }
  return problems;
}

PreparedReference::PreparedReference(const Task& task, const ReferenceCheckOptions& options,
                                     evaluation::EvaluationPolicy policy)
    : start_(std::chrono::steady_clock::now()) {
  std::string why;
  const std::string backend = resolve_backend(options.backend, options.device, &why);
  if (options.backend == "auto" && !why.empty()) check_.notes.push_back(why);
  owned_workers_ = std::make_unique<ReferenceWorkers>(backend, options.device);
  prepare(task, options, policy);
}

PreparedReference::PreparedReference(const Task& task, const ReferenceCheckOptions& options,
                                     ReferenceWorkers& shared,
                                     evaluation::EvaluationPolicy policy)
    : start_(std::chrono::steady_clock::now()) {
  plane_ = &shared.plane(task);
  check_.backend = shared.backend();
  prepare(task, options, policy);
}

void PreparedReference::prepare(const Task& task, const ReferenceCheckOptions& options,
                                evaluation::EvaluationPolicy policy) {
  ReferenceCheck& check = check_;
  check.task = task.name;
  check.task_hash = task_hash(task);
  if (owned_workers_) {
    check.backend = owned_workers_->backend();
    plane_ = &owned_workers_->plane(task);
  }
  const Workload& timed = first_timed(task);
  check.timed_workload = timed.name;
  check.bytes_per_call = static_cast<double>(bytes_per_call(task, timed));
  if (parse_baseline_kind(options.baseline) == BaselineKind::compile) {
    if (task.has_torch_reference()) {
      policy.baseline = BaselineKind::compile;
    } else {
      check.notes.push_back("--baseline compile applies to PyTorch references only; this one is "
                            "native, so only it was timed");
    }
  }
  scratch_ = std::make_unique<ScratchDir>("kforge-check");
  compile::Artifact artifact =
      reference_artifact(task, check.backend, options, *scratch_, check.reference);
  evaluator_ = std::make_unique<evaluation::Evaluator>(*plane_->candidate_plane,
                                                       *plane_->reference, task, policy);
  // The workers' owner shuts them down if what follows throws.
  check.report = with_context("reference " + check.reference,
                              [&] { return evaluator_->prepare(artifact); });
  const std::optional<compile::Artifact> fp32_model = evaluation::fp32_model_artifact(
      task, check.backend,
      [&](const compile::CompileJob& job) { return compile_with_cache(job, options); },
      scratch_->path());
  if (fp32_model) {
    with_context("reference " + check.reference,
                 [&] { evaluator_->load_fp32_model(*fp32_model); });
  }
  check.timing = with_context("reference " + check.reference,
                              [&] { return evaluator_->time_reference(); });
  check.wall_s = seconds();
}

PreparedReference::~PreparedReference() {
  evaluator_.reset();
  owned_workers_.reset();  // shuts them down; shared ones stay
}

double PreparedReference::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

ReferenceCheck check_reference(const Task& task, const ReferenceCheckOptions& options) {
  PreparedReference prepared(task, options);
  return prepared.check();
}

nlohmann::json to_json(const ReferenceCheck& check) {
  const double median_ms = check.timing.summary.median_ms;
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, seconds] : check.report.phases) phases[name] = seconds;
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : check.report.self_test.cases) {
    cases.push_back({{"name", c.name}, {"input", c.label}, {"passed", c.passed},
                     {"detail", c.detail}});
  }
  nlohmann::json compile = nullptr;
  if (check.report.compile.ran) {
    compile = {{"ok", check.report.compile.ok},
               {"compile_s", check.report.compile.compile_ms / 1000.0},
               {"median_ms", check.report.compile.median_ms},
               {"message", check.report.compile.message}};
  }
  std::vector<std::string> warnings = check.report.warnings;
  if (!check.timing.warning.empty()) warnings.push_back(check.timing.warning);
  return {{"ok", true},
          {"task", check.task},
          {"task_hash", check.task_hash},
          {"reference", check.reference},
          {"backend", check.backend},
          {"device",
           {{"name", check.report.device.name},
            {"index", check.report.device.device_index},
            {"memory_bytes", check.report.device.memory_bytes}}},
          {"timed_workload", check.timed_workload},
          {"reference_ms", median_ms},
          {"samples_ms", check.timing.samples_ms},
          {"gbps", check.bytes_per_call > 0 && median_ms > 0
                       ? nlohmann::json(check.bytes_per_call / (median_ms * 1e-3) * 1e-9)
                       : nlohmann::json(nullptr)},
          {"self_test",
           {{"passes", check.report.self_test.reference_passes},
            {"cases", cases},
            {"weaknesses", check.report.self_test.weaknesses}}},
          {"warnings", warnings},
          {"notes", check.notes},
          {"phases", phases},
          {"compile", compile},
          {"wall_s", check.wall_s}};
}

nlohmann::json failed_check_json(const std::string& task_file, const std::string& error) {
  return {{"ok", false}, {"task_file", task_file}, {"error", error}};
}

std::string render_reference_check(const ReferenceCheck& check) {
  const auto& device = check.report.device;
  std::string text = fmt::format("reference of '{}' ({}) runs on {}:{} ({})\n", check.task,
                                 check.reference, check.backend, device.device_index, device.name);
  const auto& summary = check.timing.summary;
  text += fmt::format("  on '{}': {:.4f} ms (median of {}, {:.4f}-{:.4f} ms)", check.timed_workload,
                      summary.median_ms, summary.count, summary.min_ms, summary.max_ms);
  if (check.bytes_per_call > 0 && summary.median_ms > 0) {
    text += fmt::format(", {:.1f} GB/s of the minimum traffic",
                        check.bytes_per_call / (summary.median_ms * 1e-3) * 1e-9);
  }
  text += "\n";
  const auto& compile = check.report.compile;
  if (compile.ran) {
    text += compile.ok ? fmt::format("  torch.compile: compiled in {:.1f} s, {:.4f} ms ({:.3f}x "
                                     "eager)\n",
                                     compile.compile_ms / 1000.0, compile.median_ms,
                                     compile.median_ms > 0 ? summary.median_ms / compile.median_ms
                                                           : 0.0)
                          : "  torch.compile: failed: " + compile.message + "\n";
  }
  std::set<std::string> inputs;
  for (const auto& c : check.report.self_test.cases) inputs.insert(c.label);
  text += inputs.empty() ? "  self-test: not run (no gate workloads)\n"
                         : fmt::format("  self-test: the reference passes against itself on {} "
                                       "gate input(s); {} weakness(es)\n",
                                       inputs.size(), check.report.self_test.weaknesses.size());
  for (const std::string& warning : check.report.warnings) text += "  warning: " + warning + "\n";
  if (!check.timing.warning.empty()) text += "  warning: " + check.timing.warning + "\n";
  for (const std::string& note : check.notes) text += "  note: " + note + "\n";
  std::string phases;
  for (const auto& [name, seconds] : check.report.phases) {
    phases += fmt::format("{}{} {:.1f}", phases.empty() ? "" : ", ", name, seconds);
  }
  text += fmt::format("  {:.1f} s in all (prepare: {})\n", check.wall_s, phases);
  return text;
}

}  // namespace kforge::cli

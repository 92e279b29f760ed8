// `kforge task FILE --check`: runs a task's reference on a backend the way `kforge optimize` does
// before its search, without searching: it starts the reference worker (the torch reference
// worker for a PyTorch problem, kforge-worker with the compiled reference otherwise) and
// kforge-worker, makes the expected outputs of every workload, self-tests them
// (evaluation::Evaluator::prepare), and quick-times the reference on the timed workload
// (Evaluator::time_reference). It answers "does this problem run here, and how long does its
// reference take": the suite runs it for the problems no generator serves, so that every
// problem of a level has run its reference (issue 18).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/worker_setup.h"
#include "common/scratch_dir.h"
#include "core/task.h"
#include "evaluation/evaluator.h"
#include "worker/candidate_router.h"
#include "worker/worker_client.h"

namespace kforge::cli {

/// Where and how the reference is checked.
struct ReferenceCheckOptions {
  std::string backend = "auto";  // auto, cpu or cuda (resolve_backend)
  int device = 0;
  /// "eager", or "compile": a PyTorch reference is also compiled with torch.compile and
  /// quick-timed (its compile time apart); ignored, with a note, for a native reference.
  std::string baseline = "eager";
  std::string cache_dir;          // a native reference's build cache; "" = artifact_cache_dir()
  std::string cuda_arch = "sm_90";
};

/// What the check found. Times in ms, durations in s.
struct ReferenceCheck {
  std::string task;        // the task's name
  std::string task_hash;   // task_hash(task)
  std::string reference;   // the reference file: the problem .py, or the native source
  std::string backend;     // the resolved backend
  std::string timed_workload;
  double bytes_per_call = 0.0;  // bytes_per_call(task, timed workload)
  evaluation::TaskReport report;      // device, self-test, warnings, phases, compile probe
  evaluation::TimingVerdict timing;   // the reference's quick timing on the timed workload
  std::vector<std::string> notes;     // e.g. why --baseline compile did not apply
  double wall_s = 0.0;                // the whole check, workers' start included
};

/// The worker processes of one backend and device, kept for task after task: a batch of checks
/// (`kforge task --check-batch`) starts the torch reference worker (an `import torch` and a
/// device context: seconds) once, not once per task. Two planes, made at first use: one for
/// PyTorch tasks (the torch reference worker, kforge-worker, the Python candidate worker behind
/// a router) and one for native tasks (two kforge-workers). Processes start lazily, at their
/// first request.
class ReferenceWorkers {
 public:
  /// The workers of one task kind.
  struct Plane {
    WorkerConfigs configs;
    std::unique_ptr<worker::ProcessWorker> candidates;
    std::unique_ptr<worker::ProcessWorker> python_candidates;  // PyTorch tasks only
    std::unique_ptr<worker::CandidateRouter> router;           // PyTorch tasks only
    std::unique_ptr<worker::ProcessWorker> reference;
    worker::Worker* candidate_plane = nullptr;  // router, else candidates
  };

  /// `backend` resolved (cpu or cuda), `device` its index. Starts nothing.
  ReferenceWorkers(std::string backend, int device);
  /// Shuts every worker down.
  ~ReferenceWorkers();
  ReferenceWorkers(const ReferenceWorkers&) = delete;
  ReferenceWorkers& operator=(const ReferenceWorkers&) = delete;

  const std::string& backend() const { return backend_; }
  int device() const { return device_; }
  /// The plane for `task` (a PyTorch task's, or a native task's), made at the first call.
  Plane& plane(const Task& task);
  /// Unloads every kernel and task still loaded on the workers (protocol `unload`): what the
  /// last task left there (its model, compiled modules, input sets, device memory) goes before
  /// the next. A worker that cannot (it crashed: then it is respawned at the next request) is
  /// said in the returned lines, one per handle.
  std::vector<std::string> release_tasks();

 private:
  std::string backend_;
  int device_ = 0;
  std::unique_ptr<Plane> torch_plane_;
  std::unique_ptr<Plane> native_plane_;
};

/// A task's reference prepared on its workers and timed, as `kforge optimize` has it before its
/// search, kept open for candidates: `kforge task --check` reads check() and stops, `kforge
/// eval` goes on to evaluate a kernel on candidates() through evaluator().
class PreparedReference {
 public:
  /// Resolves the backend, builds the reference's artifact, starts both workers, prepares the
  /// task and quick-times the reference. Throws Error naming the task file and what failed: no
  /// reference for the backend, a native reference that does not compile, a reference that
  /// crashes, raises, does not fit the device, fails its own self-test or cannot be timed.
  PreparedReference(const Task& task, const ReferenceCheckOptions& options,
                    evaluation::EvaluationPolicy policy = {});
  /// The same on `shared` workers (its backend and device; options.backend and options.device
  /// are not read), which outlive this object; what the task loaded there stays until
  /// shared.release_tasks().
  PreparedReference(const Task& task, const ReferenceCheckOptions& options,
                    ReferenceWorkers& shared, evaluation::EvaluationPolicy policy = {});
  /// Shuts the workers down unless they are shared.
  ~PreparedReference();
  PreparedReference(const PreparedReference&) = delete;
  PreparedReference& operator=(const PreparedReference&) = delete;

  const ReferenceCheck& check() const { return check_; }
  evaluation::Evaluator& evaluator() { return *evaluator_; }
  /// Where candidates run: kforge-worker, or for a PyTorch task a router that also sends
  /// ModelNew sources (.py) to a Python candidate worker of their own (candidate_router.h).
  worker::Worker& candidates() { return *plane_->candidate_plane; }
  /// The candidate worker's configuration (a profiler starts its own worker with it).
  const worker::ProcessWorkerConfig& candidate_config() const {
    return plane_->configs.candidate;
  }
  /// The Python candidate worker's configuration (ModelNew candidates of a PyTorch task; a
  /// profiler starts its own with it); an empty worker_path for a task without one.
  const worker::ProcessWorkerConfig& python_candidate_config() const {
    return plane_->configs.python_candidate;
  }
  /// Seconds since the constructor started.
  double seconds() const;

 private:
  void prepare(const Task& task, const ReferenceCheckOptions& options,
               evaluation::EvaluationPolicy policy);

  ReferenceCheck check_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<ScratchDir> scratch_;
  std::unique_ptr<ReferenceWorkers> owned_workers_;  // null when shared
  ReferenceWorkers::Plane* plane_ = nullptr;
  std::unique_ptr<evaluation::Evaluator> evaluator_;  // last: goes first, workers still there
};

/// Runs the check (a PreparedReference, then shut down). Throws as PreparedReference does.
ReferenceCheck check_reference(const Task& task, const ReferenceCheckOptions& options);

/// The check as JSON: {"ok": true, "task", "task_hash", "reference", "backend", "device":
/// {"name", "index", "memory_bytes"}, "timed_workload", "reference_ms" (the median),
/// "samples_ms", "gbps" (bytes_per_call over the median; null without bytes), "self_test":
/// {"passes", "cases", "weaknesses"}, "warnings", "notes", "phases" ({name: s}),
/// "compile" (null unless probed: {"ok", "compile_s", "median_ms", "message"}), "wall_s"}.
nlohmann::json to_json(const ReferenceCheck& check);

/// A failed check as JSON: {"ok": false, "task_file", "error"}.
nlohmann::json failed_check_json(const std::string& task_file, const std::string& error);

/// The console summary: device, the reference's time on the timed workload, the self-test,
/// the warnings and where the time went.
std::string render_reference_check(const ReferenceCheck& check);

}  // namespace kforge::cli

// `kforge eval TASK KERNEL`: kforge's trusted evaluation of one kernel a user wrote, without a
// search. The kernel (a native source behind include/kforge/kernel.h: .cpp for cpu, .cu for
// cuda) is screened and built like a candidate, gated (every check of rung 0), quick-timed (rung
// 1), timed on every timed workload (rung 2) and then against the reference in the final rung's
// interleaved rounds with a confidence interval (rung 3), and profiled under Nsight Compute on
// cuda. The task may be a TOML task or a PyTorch problem (its reference runs in the torch
// reference worker, as in `kforge optimize`). Nothing is written to the memory unless --record
// is given: then the evaluation is recorded there as a run of one candidate (eval_record.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/reference_check.h"
#include "compile/compiler.h"
#include "evaluation/evaluator.h"
#include "evaluation/profiler.h"
#include "memory/recorded_run.h"
#include "memory/sqlite_store.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kforge::cli {

struct EvalCommandOptions {
  std::string task_path;    // a task.toml or a problem .py
  std::string kernel_path;  // the kernel's source
  std::string backend = "auto";
  int device = 0;
  std::string baseline = "eager";
  int final_rounds = 5;     // rung 3's paired rounds (EvaluationPolicy::final_rounds)
  std::string profile = "auto";  // auto, on, off (ncu on a backend that profiles)
  std::string cuda_arch = "sm_90";
  std::string cache_dir;    // build cache; "" = artifact_cache_dir()
  bool json = false;
  bool record = false;      // --record: write the outcome to the memory
  std::string memory_path;  // --memory; "" = memory::default_memory_path(), as optimize
};

/// What the evaluation found. Times in ms.
struct KernelEvaluation {
  std::string kernel;               // the kernel file, absolute
  std::string source;               // its text as evaluated
  std::string family;               // the task's operator family
  ReferenceCheck reference;         // the reference as prepared and quick-timed
  /// The kernel's verdict: ok when it passed every rung it reached up to the final one, else
  /// the first failure's (rejected_by_policy at the screen, compile_error, wrong_answer, ...).
  Verdict verdict = Verdict::ok;
  std::string message;              // why, when not ok
  std::string failed_at;            // "screen", "compile", "rungs 0-1", "rung 2", "rung 3"
  compile::Artifact artifact;
  std::string toolchain;            // "g++ 12.2.0", "nvcc 13.0.88": what built it
  std::optional<evaluation::CandidateEvaluation> quick;  // rungs 0 and 1
  std::optional<evaluation::FullRung> full;              // rung 2
  evaluation::SampleSummary reference_final;             // rung 3
  evaluation::SampleSummary kernel_final;
  evaluation::SpeedupEstimate speedup;                   // reference / kernel, with its CI
  std::optional<evaluation::ProfileReport> profile;
  double wall_s = 0.0;
  bool correct() const { return verdict == Verdict::ok; }
};

void add_eval_command(CLI::App& app, EvalCommandOptions& options);

/// The options of how a kernel is built and measured, shared by `eval` and `verify`: --device,
/// --final-rounds, --profile, --cuda-arch, --cache-dir.
void add_measurement_options(CLI::App& command, EvalCommandOptions& options);

/// Evaluates options.kernel_path against `task` on options.backend ("auto" resolved here), with
/// `policy` (its final_rounds replaced by options.final_rounds; a caller sets the gate's
/// base_seed for fresh inputs). Throws as below.
KernelEvaluation evaluate_kernel(const Task& task, const EvalCommandOptions& options,
                                 evaluation::EvaluationPolicy policy);

/// Evaluates options.kernel_path against options.task_path. Throws Error (exit 1) when the
/// evaluation cannot happen: a missing or unreadable file, a Python file (Python candidates are
/// not taken yet), a task or reference that is broken, --profile on without ncu. A kernel that
/// fails a rung is a result (verdict), not an error.
KernelEvaluation evaluate_kernel(const EvalCommandOptions& options);

/// The evaluation as JSON: {"kernel", "task", "backend", "device", "verdict", "correct",
/// "message", "failed_at", "compile": {"key", "from_cache", "compile_s", "log"}, "gate",
/// "quick" ({"median_ms", "samples_ms"}), "full" ({"geomean_speedup", "workloads"}), "final"
/// ({"reference_median_ms", "kernel_median_ms", "speedup", "ci_low", "ci_high", "level",
/// "achieved_gbps"}), "reference" (the check's to_json), "profile", "wall_s"}; absent rungs
/// are null.
nlohmann::json to_json(const KernelEvaluation& evaluation);

/// The console summary.
std::string render_kernel_evaluation(const KernelEvaluation& evaluation);

/// The memory `kforge eval --record` writes to (options.memory_path, else
/// memory::default_memory_path(), as `kforge optimize` resolves it), opened and checked to be
/// writable. Throws Error naming the file when it cannot be created, opened or written, so that
/// the evaluation does not run only to lose its record.
std::unique_ptr<memory::SqliteStore> open_memory_to_record(const EvalCommandOptions& options);

/// The evaluation as a recorded run (kind "eval") of one candidate: its verdict, where it
/// failed, its source, and its times in ms: at the final rung with the speedup and its interval
/// when correct, else the quick rung's medians of the kernel and the reference when it got that
/// far. The message is cut to its first 2000 characters (a compile log can be long).
memory::RecordedRun recorded_run_of(const KernelEvaluation& evaluation,
                                    const EvalCommandOptions& options);

/// Runs `kforge eval`: 0 when the kernel is correct, 3 (ExitCode::not_all_correct) when it
/// failed a rung; throws Error otherwise. With options.record, the memory is checked before the
/// evaluation and the outcome, correct or not, is recorded after it.
int run_eval_command(const EvalCommandOptions& options);

}  // namespace kforge::cli

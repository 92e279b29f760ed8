#include "cli/eval_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/commands.h"
#include "cli/optimize_command.h"
#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"
#include "common/scratch_dir.h"
#include "compile/toolchain_compiler.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// The kernel's source, refused with what kforge eval takes when it cannot be evaluated: a
// native kernel, or for a PyTorch task a KernelBench ModelNew source (.py).
std::string read_kernel(const std::string& path, const std::string& backend, bool torch_task) {
  if (!fs::is_regular_file(path)) {
    throw Error(path + ": no such kernel file (expected a " +
                backends::get_backend(backend).source_extension + " source behind kforge's "
                "kernel ABI, include/kforge/kernel.h" +
                (torch_task ? std::string(", or a ModelNew .py") : std::string()) + ")");
  }
  if (fs::path(path).extension() == ".py" && !torch_task) {
    throw Error(path + ": a Python file; a ModelNew candidate needs a PyTorch task (a problem "
                ".py, or a TOML task with [reference] torch); this task takes a native kernel (" +
                backends::get_backend(backend).source_extension + " on " + backend +
                ") behind include/kforge/kernel.h");
  }
  return read_file(path);
}

// Rung 3 and the profile of a kernel that passed rungs 0-2.
void final_rung(PreparedReference& prepared, const Task& task, const EvalCommandOptions& options,
                KernelEvaluation& result) {
  evaluation::Evaluator& evaluator = prepared.evaluator();
  const int handle = result.quick->handle;
  evaluation::EvaluationPlane::PairedSamples paired =
      evaluator.time_paired(handle, prepared.candidates());
  if (!paired.failure.empty()) {
    result.verdict = Verdict::runtime_error;
    for (const Verdict verdict : {Verdict::wrong_answer, Verdict::rejected_by_policy}) {
      if (paired.failure.starts_with(to_string(verdict) + ":")) result.verdict = verdict;
    }
    result.message = paired.failure;
    result.failed_at = "rung 3";
    return;
  }
  result.reference_final = evaluation::summarize(paired.reference_ms());
  result.kernel_final = evaluation::summarize(paired.candidate_ms());
  const evaluation::EvaluationPolicy& policy = evaluator.policy();
  result.speedup = evaluation::judge_paired(paired.reference_rounds, paired.candidate_rounds,
                                            policy.acceptance_level, policy.min_gain,
                                            policy.gate.base_seed)
                       .speedup;
  if (options.profile == "off") return;
  const std::string& backend = result.reference.backend;
  if (!backends::get_backend(backend).can.ncu_profiler) {
    result.reference.notes.push_back("not profiled: Nsight Compute profiles GPU kernels, and this "
                                     "one ran on " + backend);
    return;
  }
  std::optional<std::string> ncu = evaluation::find_ncu();
  if (!ncu) {  // --profile on without ncu was refused before anything ran
    result.reference.notes.push_back("not profiled: Nsight Compute (ncu) was not found in $PATH, "
                                     "$CUDA_HOME/bin or /usr/local/cuda/bin");
    return;
  }
  ScratchDir scratch("kforge-profile");
  evaluation::NcuProfiler profiler(prepared.candidate_config(), *ncu, scratch);
  // A ModelNew runs in the Python candidate worker, its forward alone counted (profiler.h).
  if (task.has_torch_reference()) {
    profiler.set_python_worker(prepared.python_candidate_config(), policy.python_load_timeout_s);
  }
  result.profile = profiler.profile(result.artifact, task, evaluator.timed_workload(),
                                    evaluator.profile_inputs());
}

}  // namespace

void add_eval_command(CLI::App& app, EvalCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "eval", "Evaluate one kernel you wrote against a task, without a search: build, gate, "
              "time against the reference (with a confidence interval) and profile it");
  command->add_option("task", options.task_path, "a task.toml or a PyTorch problem .py")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("kernel", options.kernel_path,
                      "the kernel's source behind include/kforge/kernel.h (.cpp for cpu, .cu "
                      "for cuda)")
      ->required();
  command->add_option("--backend", options.backend, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  command->add_option("--baseline", options.baseline,
                      "eager, or compile (a PyTorch reference is also compiled with "
                      "torch.compile and quick-timed)")
      ->check(CLI::IsMember({"eager", "compile"}))
      ->capture_default_str();
  add_measurement_options(*command, options);
  command->add_flag("--json", options.json, "print the evaluation as JSON");
  command->add_flag("--record", options.record,
                    "record the outcome (verdict, timings, speedup, source) in the HTG memory, "
                    "where `kforge memory show` lists it; without it nothing is written there");
  command
      ->add_option("--memory", options.memory_path,
                   "HTG memory file --record writes to (default "
                   "$XDG_DATA_HOME/kforge/memory.sqlite; KFORGE_MEMORY_DB is still read)")
      ->envname("KFORGE_MEMORY");
}

void add_measurement_options(CLI::App& command, EvalCommandOptions& options) {
  command.add_option("--device", options.device, "the device index")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--final-rounds", options.final_rounds,
                     "interleaved rounds of the kernel and the reference at the final rung")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command.add_option("--profile", options.profile,
                     "auto (Nsight Compute where the backend profiles and ncu is found), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  command.add_option("--cuda-arch", options.cuda_arch, "nvcc -arch for a cuda kernel")
      ->capture_default_str();
  command.add_option("--cache-dir", options.cache_dir, "build cache (default: kforge's)")
      ->envname("KFORGE_CACHE_DIR");
}

KernelEvaluation evaluate_kernel(const EvalCommandOptions& options) {
  std::string why;
  const std::string backend = resolve_backend(options.backend, options.device, &why);
  if (!fs::is_regular_file(options.kernel_path)) {
    read_kernel(options.kernel_path, backend, is_torch_problem(options.task_path));  // says why
  }
  const Task task = load_task(options.task_path);
  EvalCommandOptions resolved = options;
  resolved.backend = backend;
  KernelEvaluation result = evaluate_kernel(task, resolved, evaluation::EvaluationPolicy{});
  if (!why.empty() && options.backend == "auto") result.reference.notes.push_back(why);
  return result;
}

KernelEvaluation evaluate_kernel(const Task& task, const EvalCommandOptions& options,
                                 evaluation::EvaluationPolicy policy) {
  KernelEvaluation result;
  result.kernel = fs::absolute(options.kernel_path).lexically_normal().string();
  result.family = task.family;
  const std::string backend = resolve_backend(options.backend, options.device, nullptr);
  const std::string source = read_kernel(options.kernel_path, backend, task.has_torch_reference());
  result.source = source;
  if (options.profile == "on") {
    if (!backends::get_backend(backend).can.ncu_profiler) {
      throw Error("--profile on needs " +
                  backends_that_can(&backends::Capabilities::ncu_profiler,
                                    "that Nsight Compute profiles") +
                  " (Nsight Compute profiles GPU kernels)");
    }
    if (!evaluation::find_ncu()) {
      throw Error("--profile on: Nsight Compute (ncu) was not found in $PATH, $CUDA_HOME/bin or "
                  "/usr/local/cuda/bin; install it or use --profile off");
    }
  }
  ReferenceCheckOptions reference_options;
  reference_options.backend = backend;
  reference_options.device = options.device;
  reference_options.baseline = options.baseline;
  reference_options.cache_dir = options.cache_dir;
  reference_options.cuda_arch = options.cuda_arch;
  policy.final_rounds = options.final_rounds;
  PreparedReference prepared(task, reference_options, policy);
  result.reference = prepared.check();
  evaluation::Evaluator& evaluator = prepared.evaluator();

  const std::string source_name = fs::path(options.kernel_path).filename().string();
  if (std::string violations = evaluator.screen(source, source_name, backend); !violations.empty()) {
    result.verdict = Verdict::rejected_by_policy;
    result.message = violations;
    result.failed_at = "screen";
  }
  if (result.correct()) {
    compile::ToolchainOptions toolchain;
    toolchain.cache_dir = options.cache_dir.empty() ? artifact_cache_dir() : options.cache_dir;
    toolchain.include_dirs = kernel_include_dirs();
    toolchain.cuda_arch = options.cuda_arch;
    compile::ToolchainCompiler compiler(toolchain, &backends::toolchain_for);
    result.toolchain = compiler.toolchain(backend);
    result.artifact =
        compiler.compile({backend, source, source_name, {}, compile::declared_cuda_arch(source)});
    if (result.artifact.verdict != Verdict::ok) {
      result.verdict = result.artifact.verdict;
      result.message = result.artifact.log;
      result.failed_at = "compile";
    }
  }
  if (result.correct()) {
    result.quick = evaluator.evaluate(result.artifact, prepared.candidates());
    if (result.quick->verdict != Verdict::ok) {
      result.verdict = result.quick->verdict;
      result.message = result.quick->message;
      result.failed_at = "rungs 0-1";
    }
  }
  if (result.correct()) {
    result.full = evaluator.full_rung(result.quick->handle, prepared.candidates());
    if (result.full->verdict != Verdict::ok) {
      result.verdict = result.full->verdict;
      result.message = result.full->message;
      result.failed_at = "rung 2";
    }
  }
  if (result.correct()) final_rung(prepared, task, options, result);
  result.wall_s = prepared.seconds();
  return result;
}

int run_eval_command(const EvalCommandOptions& options) {
  // Checked first: a memory that cannot take the record is an error before minutes of timing.
  std::unique_ptr<memory::SqliteStore> store;
  if (options.record) store = open_memory_to_record(options);
  const KernelEvaluation result = evaluate_kernel(options);
  std::optional<int64_t> run_id;
  if (store) run_id = store->record_run(recorded_run_of(result, options));
  if (options.json) {
    nlohmann::json j = to_json(result);
    j["recorded"] = run_id ? nlohmann::json{{"memory", store->path().string()}, {"run", *run_id}}
                           : nlohmann::json();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << render_kernel_evaluation(result);
    if (run_id) {
      std::cout << fmt::format("  recorded in the memory {} as run {} (kforge memory show)\n",
                               store->path().string(), *run_id);
    }
  }
  return static_cast<int>(result.correct() ? ExitCode::ok : ExitCode::not_all_correct);
}

}  // namespace kforge::cli

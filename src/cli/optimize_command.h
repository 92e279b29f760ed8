// `kforge optimize`: one run of one task, wired from the real parts.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "cli/llm_session.h"
#include "core/task.h"
#include "generation/kernel_family.h"
#include "search/optimizer.h"

namespace kforge::cli {

struct OptimizeCommandOptions {
  std::string task_path;          // required unless resume_dir is set
  std::string resume_dir;         // --resume: continue this run (optimize_resume.h)
  std::string backend = "auto";   // auto | cpu | cuda
  std::string run_dir;            // default: runs/<task>-<timestamp>
  std::string memory_path;        // default: memory::default_memory_path()
  std::string cache_dir;          // default: <run base>/../.kforge-cache or $KFORGE_CACHE_DIR
  std::string cuda_arch = "sm_90";
  int device = 0;
  /// --devices (cuda): one candidate worker per listed device, each listed once; the reference
  /// worker runs on the first. Empty: `device` alone.
  std::vector<int> devices;
  /// --workers (cpu): candidate worker processes. They share the machine's cores (no pinning),
  /// so timings under N > 1 are noisier; the default is 1.
  int workers = 1;
  bool json = false;              // print result.json instead of the summary
  /// The options given on the command line, by first long name ("--seed"); not those set from
  /// environment variables (KFORGE_*), which a resume may find set for the whole session. With
  /// --resume, such an option whose value differs from the recorded one is refused before
  /// anything is written (optimize_resume.h); budget limits replace the recorded ones.
  std::set<std::string> given_flags;
  /// Final-rung hardware profile of the best candidate with Nsight Compute: "auto" (on cuda when
  /// ncu is found), "on" (an error when it is not), "off".
  std::string profile = "auto";
  /// --baseline: "eager" or "compile" (core/baseline.h; cli/optimize_baseline.h says what a
  /// compile baseline does); --baseline-cache: "use", "refresh" or "off".
  std::string baseline = "eager";
  std::string baseline_cache = "use";
  std::string generator = "templates";  // templates | llm
  /// --language: auto | native | cuda | triton (core/kernel_language.h); auto is cuda for a
  /// PyTorch problem with --generator llm, native otherwise.
  std::string language = "auto";
  LlmCommandOptions llm;          // --generator llm only
  std::string policy = "htam";    // --policy, parsed into search.policy by run_optimize
  std::string fidelity = "ladder";  // --fidelity, parsed into search.fidelity by run_optimize
  std::vector<std::string> ablate;            // --ablate names, parsed into search.ablations
  std::vector<std::string> similar_families;  // --similar-families groups "a,b,c"
  search::OptimizeOptions search;
  /// The run's evaluation policy (--final-rounds); the run's evaluator owns it from there.
  evaluation::EvaluationPolicy evaluation;
};

/// Runs `kforge optimize` (or with resume_dir, continues a run; a finished one is reported as
/// complete and its summary printed again); prints progress to stderr and the summary (or JSON)
/// to stdout. Throws Error for bad input or a broken environment (with --generator llm: no
/// endpoint configured; a zero or negative budget limit), before the run directory is written.
/// Returns 0, or 130 when Ctrl-C stopped the search early (the run still ends with its best
/// kernel and result.json unless Ctrl-C was pressed twice, and can be continued with --resume).
int run_optimize(const OptimizeCommandOptions& options);

/// The devices the candidate workers run on: `devices` (cuda only, no repeats) or {device}
/// (with `workers` > 1 on cpu: `workers` copies of it). Throws Error naming the flag for a
/// repeated device, --devices on cpu or --workers on cuda.
std::vector<int> candidate_devices(const OptimizeCommandOptions& options,
                                   const std::string& backend);

/// Every family with built-in kernels on some backend: the folders of `root`/kernels/<backend>/
/// that hold a family.toml, sorted, each name once.
std::vector<std::string> known_families(const std::string& root);

/// The kernel family of `task` for the templates generator from `root`/kernels/`backend`
/// (`backend` names the folder: a backend's, or "triton"). Throws Error naming the task file:
/// for a PyTorch task no family matched (with why each family did not, and that --generator
/// llm is the way), or no built-in kernels of that family for `backend` (with the known ones).
generation::KernelFamily load_family_for(const Task& task, const std::string& root,
                                         const std::string& backend);

/// Resolves "auto" by asking a cuda worker for its device; "cpu" when none answers.
/// `why` receives the reason when falling back to cpu.
std::string resolve_backend(const std::string& requested, int device, std::string* why);

/// "the cuda backend" (the backends of this build with capability `flag`), or when none has it,
/// "a backend <kind>, and this build has none (why each is absent)": for messages refusing an
/// option that needs such a backend.
std::string backends_that_can(bool backends::Capabilities::*flag, const std::string& kind);

}  // namespace kforge::cli

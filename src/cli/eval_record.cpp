// `kforge eval --record` (eval_command.h): the memory it writes to and what it writes there.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "backends/backend.h"
#include "cli/eval_command.h"
#include "common/error.h"
#include "common/paths.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// A compile log or a wrong answer's report can run to pages; the memory keeps the start.
constexpr size_t kRecordedMessageChars = 2000;

// The command that reproduces the evaluation, with absolute paths.
std::string command_of(const KernelEvaluation& e, const EvalCommandOptions& options) {
  std::string command = fmt::format(
      "kforge eval {} {} --backend {} --device {} --baseline {} --final-rounds {} --profile {}",
      fs::absolute(options.task_path).lexically_normal().string(), e.kernel, e.reference.backend,
      options.device, options.baseline, options.final_rounds, options.profile);
  // The architecture flag matters where kernels are built for a GPU's compute capability.
  if (backends::get_backend(e.reference.backend).can.compute_capability) {
    command += " --cuda-arch " + options.cuda_arch;
  }
  return command;
}

}  // namespace

std::unique_ptr<memory::SqliteStore> open_memory_to_record(const EvalCommandOptions& options) {
  const std::string path =
      options.memory_path.empty() ? memory::default_memory_path().string() : options.memory_path;
  return with_context("--record: cannot record the evaluation in the memory " + path, [&] {
    auto store =
        memory::SqliteStore::open(path, fs::path(resource_root()) / "knowledge" / "seed.toml");
    if (const std::string added = memory::describe_seed_additions(*store); !added.empty()) {
      std::cerr << "kforge: note: " << added << "\n";
    }
    store->check_writable();
    return store;
  });
}

memory::RecordedRun recorded_run_of(const KernelEvaluation& e, const EvalCommandOptions& options) {
  memory::RecordedRun run;
  run.kind = "eval";
  run.task = e.reference.task;
  run.command = command_of(e, options);
  const auto& device = e.reference.report.device;
  run.provenance = {e.reference.backend, device.name, device.compute_capability,
                    e.toolchain,         e.family,    e.reference.task_hash};
  memory::RecordedCandidate c;
  c.candidate_id = e.artifact.key;
  c.source_name = e.kernel;
  c.source = e.source;
  c.verdict = to_string(e.verdict);
  c.message = e.message.substr(0, kRecordedMessageChars);
  c.failed_at = e.failed_at;
  if (e.correct()) {
    c.median_ms = e.kernel_final.median_ms;
    c.reference_median_ms = e.reference_final.median_ms;
    c.speedup = e.speedup.speedup;
    c.ci_low = e.speedup.ci_low;
    c.ci_high = e.speedup.ci_high;
    c.level = e.speedup.level;
  } else if (e.quick && e.quick->verdict == Verdict::ok) {
    // Failed later (rung 2 or 3): the quick rung timed it beside the reference.
    c.median_ms = e.quick->timing.median_ms;
    c.reference_median_ms = e.reference.timing.summary.median_ms;
  }
  run.candidates.push_back(std::move(c));
  return run;
}

}  // namespace kforge::cli

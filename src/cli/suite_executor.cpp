#include "cli/suite_executor.h"

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/suite_problems.h"
#include "cli/validators.h"
#include "common/error.h"
#include "common/paths.h"
#include "executor/local_executor.h"
#include "executor/slurm_executor.h"
#include "memory/sqlite_store.h"

namespace kforge::cli {
namespace fs = std::filesystem;

void add_executor_options(CLI::App& app, SuiteCommandOptions& options) {
  CLI::App* suite = &app;
  const char* group = "Where the tasks run";
  suite
      ->add_option("--executor", options.executor,
                   "local: each task a child process here, one at a time; slurm: each task "
                   "its own sbatch job (the suite directory on a filesystem the nodes share)")
      ->envname("KFORGE_EXECUTOR")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str()
      ->group(group);
  suite->add_option("--partition", options.partition, "slurm: sbatch --partition of every job")
      ->envname("KFORGE_SLURM_PARTITION")
      ->group(group);
  suite
      ->add_option("--gpus-per-task", options.gpus_per_task,
                   "slurm: GPUs of each job (sbatch --gpus; the task runs with --devices 0..N-1)")
      ->envname("KFORGE_GPUS_PER_TASK")
      ->check(whole_number(0, 64))
      ->group(group);
  suite
      ->add_option("--max-parallel", options.max_parallel,
                   "slurm: jobs of the suite pending or running at once")
      ->envname("KFORGE_MAX_PARALLEL")
      ->check(whole_number(1, 100000))
      ->capture_default_str()
      ->group(group);
  suite
      ->add_option("--slurm-arg", options.slurm_args,
                   "slurm: an sbatch option passed as it is, e.g. --slurm-arg=--account=lab "
                   "(repeat for more)")
      ->allow_extra_args(false)
      ->group(group);
  suite
      ->add_flag("--retry-failed", options.retry_failed,
                 "slurm: submit once more a task whose job Slurm cancelled, timed out, or whose "
                 "node failed")
      ->envname("KFORGE_RETRY_FAILED")
      ->group(group);
}

namespace {

// Refuses a Slurm option given to the local executor: it would be silently ignored.
void refuse_slurm_options_for_local(const SuiteCommandOptions& options) {
  auto refuse = [](const char* name) {
    throw UsageError(std::string(name) +
                     " needs --executor slurm (the suite runs --executor local)");
  };
  if (!options.partition.empty()) refuse("--partition");
  if (options.gpus_per_task != 0) refuse("--gpus-per-task");
  if (options.max_parallel != 1) refuse("--max-parallel");
  if (!options.slurm_args.empty()) refuse("--slurm-arg");
  if (options.retry_failed) refuse("--retry-failed");
}

}  // namespace

std::unique_ptr<executor::Executor> make_suite_executor(
    const SuiteCommandOptions& options, const fs::path& suite_dir,
    const std::vector<std::string>& optimize_args) {
  if (options.executor == "local") {
    refuse_slurm_options_for_local(options);
    return std::make_unique<executor::LocalExecutor>();
  }
  if (options.executor != "slurm") {
    throw UsageError("--executor: expected local or slurm, got '" + options.executor + "'");
  }
  executor::SlurmSettings settings;
  settings.suite_dir = suite_dir;
  const std::string memory = forwarded_value(optimize_args, "--memory", "KFORGE_MEMORY", "");
  settings.suite_memory =
      fs::absolute(memory.empty() ? memory::default_memory_path() : fs::path(memory));
  settings.seed_knowledge = fs::path(resource_root()) / "knowledge" / "seed.toml";
  settings.partition = options.partition;
  settings.gpus_per_task = options.gpus_per_task;
  settings.max_parallel = static_cast<std::size_t>(options.max_parallel);
  settings.sbatch_args = options.slurm_args;
  settings.retry_failed = options.retry_failed;
  return std::make_unique<executor::SlurmExecutor>(
      settings, std::make_unique<executor::CommandSlurmClient>());
}

}  // namespace kforge::cli

// `kforge suite --executor local|slurm`: the suite's options for where its tasks run, and the
// executor (executor/executor.h) they describe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/suite_command.h"
#include "executor/executor.h"

namespace CLI {
class App;
}

namespace kforge::cli {

/// Adds --executor, --partition, --gpus-per-task, --max-parallel, --slurm-arg and
/// --retry-failed to the `suite` subcommand.
void add_executor_options(CLI::App& suite, SuiteCommandOptions& options);

/// The executor `options` ask for. `optimize_args` are the suite's optimize options (the slurm
/// executor takes the suite's memory from their --memory, else KFORGE_MEMORY or the default).
/// Throws Error before any task runs: a Slurm option with --executor local (naming it), or
/// --executor slurm where sbatch, squeue or scancel is not on PATH.
std::unique_ptr<executor::Executor> make_suite_executor(
    const SuiteCommandOptions& options, const std::filesystem::path& suite_dir,
    const std::vector<std::string>& optimize_args);

}  // namespace kforge::cli

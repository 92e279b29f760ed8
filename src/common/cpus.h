// How many CPUs this process may use: the thread pools of kforge (reference outputs, comparisons,
// input generation, builds) and the OpenMP threads of cpu kernels size themselves by it, so that
// a task given one CPU by a batch scheduler does not spread over the whole node.
#pragma once

#include <optional>
#include <string>

namespace kforge {

/// The CPUs this process may use, >= 1: the smallest of
///   - the CPUs in its affinity mask (sched_getaffinity: taskset, cpusets, a scheduler's binding);
///   - $KFORGE_CPUS when set (a whole number >= 1; kforge sets it in its workers' environment);
///   - inside a Slurm job ($SLURM_JOB_ID set), the job's CPUs on this node: $SLURM_CPUS_PER_TASK
///     when set (sbatch --cpus-per-task), else the first count of $SLURM_JOB_CPUS_PER_NODE
///     ("4" or "4(x2),2": Slurm's output environment variables, sbatch(1)).
/// A Slurm job without CPU binding (TaskPlugin=task/none) sees every core in its mask; the job's
/// allocation is then the only bound that says what the job was given.
/// Throws Error when $KFORGE_CPUS is set but not a whole number >= 1.
int usable_cpus();

/// The Slurm allocation bound of usable_cpus() from these variables' values (nullopt = unset);
/// nullopt when `job_id` is unset or no count can be read. Exposed for tests.
std::optional<int> slurm_cpus(const std::optional<std::string>& job_id,
                              const std::optional<std::string>& cpus_per_task,
                              const std::optional<std::string>& job_cpus_per_node);

}  // namespace kforge

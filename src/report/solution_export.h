// A finished PyTorch run as a KernelBench-format solution: solution.py with `class ModelNew`
// that runs the run's best kernel (docs/torch_solutions.md). The file is written by kforge's
// Python side (python -m kforge_torch solution, python/kforge_torch/solution.py), which reads the
// run directory: reference.torch.json, result.json, run.json, best.cpp / best.cu and the problem
// file. Used by `kforge export RUN_DIR --format kernelbench` and at the end of `kforge optimize
// PROBLEM.py`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include <filesystem>

namespace kforge::report {

/// Writes the solution of the finished run in `run_dir` to `output` (replaced atomically) with
/// kforge's include folders (kernel_include_dirs()) written into the kernel's source. Runs the
/// generator under torch_python() with torch_environment() (it imports no torch; a second or
/// two) and a `timeout_s` limit. Throws Error with the generator's own message, which names the
/// file and what is wrong: not a PyTorch problem's run (no reference.torch.json), an unfinished
/// run (no result.json), a run without a best kernel, a problem file changed since the run.
void write_kernelbench_solution(const std::filesystem::path& run_dir,
                                const std::filesystem::path& output, double timeout_s = 120.0);

/// The ModelNew shell of a PyTorch task's Triton candidates (python -m kforge_torch
/// model-new-shell, python/kforge_torch/solution_shell.py): the problem's ModelNew with the
/// generation::kKernelModuleMarker line where the templates generator writes each candidate's
/// kernel module. `derived` is the task's derived JSON (task/torch_task.h derived_json). Runs as
/// write_kernelbench_solution does; throws Error with the generator's message (a task without
/// a family, a problem file gone or changed since the task was derived).
std::string model_new_shell(const nlohmann::json& derived, double timeout_s = 120.0);

/// True when `run_dir` holds a PyTorch task's run (reference.torch.json), the runs a solution
/// can be written for.
bool is_torch_run(const std::filesystem::path& run_dir);

}  // namespace kforge::report

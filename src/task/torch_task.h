// PyTorch problem files as tasks (docs/torch_tasks.md).
//
// A KernelBench-format problem file (a Python module with `class Model(nn.Module)`, module-level
// size constants, `get_inputs()` and `get_init_inputs()`) is turned into a Task by kforge's
// derivation (python/kforge_torch/derive.py), run in a Python subprocess with a timeout: the
// orchestrator never imports PyTorch or touches a device itself. The derived task keeps the JSON
// the PyTorch reference worker needs (which signature tensor lives where in the module, the
// module's constants and shapes per workload) in Task::torch_reference.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/task.h"

namespace kforge {

/// True when `path` names a PyTorch problem file (a `.py` file) rather than a TOML task.
bool is_torch_problem(const std::string& path);

/// A Python interpreter that can import torch: $KFORGE_PYTHON when set (an error if it cannot),
/// else the first of `python3` on $PATH and /usr/bin/python3 that has the package (found, not
/// imported: an import costs seconds). Probed once per process. Throws Error listing what was tried and why each
/// failed, with the fix (Debian's python3-torch, or KFORGE_PYTHON).
std::string torch_python();

/// Where kforge's Python processes keep the bytecode of what they import (PYTHONPYCACHEPREFIX):
/// $KFORGE_PYCACHE when set ("off": nowhere of kforge's, Python's own behaviour), else
/// $XDG_CACHE_HOME/kforge/pycache, else ~/.cache/kforge/pycache; "" when off or without a home.
std::string python_bytecode_cache();

/// "NAME=value" entries a kforge Python process needs on top of `base`: PYTHONPATH with
/// <resource root>/python first, KFORGE_INPUTS_LIB (the input generator's C library,
/// libkforge_inputs.so next to the running executable unless $KFORGE_INPUTS_LIB is set), and
/// PYTHONPYCACHEPREFIX=python_bytecode_cache() unless `base` names a prefix of its own (then
/// PYTHONDONTWRITEBYTECODE is dropped, as the bytecode goes to kforge's folder, not beside the
/// sources). Why: a PyTorch installed without bytecode, with PYTHONDONTWRITEBYTECODE=1 or in a
/// read-only folder compiles every module from source at every start; on the H200 machine that
/// made `import torch` 4-5 s and PyTorch 2.11's lazy torch._dynamo import, on the first operator
/// on meta tensors, 5-6 s more (bench/torch/README.md, 2026-12-04 evening).
std::vector<std::string> torch_environment(std::vector<std::string> base);

/// torch_environment of this process's own environment.
std::vector<std::string> torch_environment();

/// The command line of the PyTorch reference worker up to (not including) its
/// `--backend B --device N` arguments: {python, "-m", "kforge_torch", "worker"}.
std::vector<std::string> torch_worker_command();

/// The command line of the Python candidate worker (ModelNew candidates, python/kforge_torch/
/// candidate_worker.py) up to its `--backend B --device N` arguments: {python, "-m",
/// "kforge_torch", "candidate-worker"}. A process apart from the reference worker's.
std::vector<std::string> torch_candidate_worker_command();

/// Runs `python -m kforge_torch derive PATH` and returns the derived task JSON. Throws Error
/// with the derivation's own message (which names the file and what was expected) when it
/// fails, and a timeout message after `timeout_s` seconds.
nlohmann::json derive_torch_task(const std::string& path, double timeout_s = 300.0);

/// "" when torch.compile can be used by torch_python() (PyTorch 2.x, Dynamo supported on its
/// Python), else one sentence saying why not (e.g. "PyTorch 1.13.0 has no torch.compile (it came
/// with PyTorch 2.0) ..."). Asks `python -m kforge_torch compile-support` once per process (it
/// imports torch and torch._dynamo: 3-10 s on the H200 machine), unless
/// $KFORGE_TORCH_COMPILE_SUPPORT names torch_python(): `kforge suite` sets it for its children
/// (each a `kforge optimize` with the same Python) once it got "" itself. Throws Error when no
/// Python has torch or the probe fails.
std::string torch_compile_support(double timeout_s = 120.0);

/// Why each built-in family did not match a derived PyTorch task (its torch reference's
/// "family_misses"): {family, reason} pairs in name order; empty when there are none.
std::vector<std::pair<std::string, std::string>> family_misses(const Task& task);

/// family_misses with the families that missed for the same reason on one entry: {"gelu, relu,
/// silu", reason}, in the order each reason first appears. A module with two outputs misses
/// every family alike; a user reads that once, not fourteen times.
std::vector<std::pair<std::string, std::string>> grouped_family_misses(const Task& task);

/// True when $KFORGE_TORCH_COMPILE_SUPPORT is `python`: a parent kforge (a suite) asked that
/// interpreter already and torch.compile works there.
bool compile_support_handed_down(const std::string& python);

/// The Task of a derived task JSON (format "kforge-torch-task", version 1). `source_path` is the
/// problem file (or the TOML file that holds the derivation). Validates what load_task validates
/// (every shape bound by every workload, a timed workload, unique names) and that the torch
/// section covers every signature tensor and workload. Throws Error naming `source_path` and the
/// field.
Task task_from_derived(const nlohmann::json& derived, const std::string& source_path);

/// Checks task.torch_reference against the task: a `torch.tensors` entry per signature tensor
/// with a source that fits its role, and per workload the module's constants and shapes with the
/// signature's element counts. Throws Error naming task.source_path and the field.
void check_torch_reference(const Task& task);

/// TOML text of a PyTorch task (`kforge task FILE -o task.toml`): the usual task tables plus
/// `[reference] torch = "<problem>"` and a `[torch]` table with the module mapping, so that
/// load_task reads it back into the same task. The problem path is written relative to
/// `toml_dir` when it lies below it, else (and with an empty `toml_dir`) absolute. Requires
/// task.torch_reference.
std::string torch_task_toml(const Task& task, const std::string& toml_dir);

/// The derived-task JSON of a TOML task that names `[reference] torch`: its `[torch]` table
/// (`torch`, converted to JSON) joined with the task's own fields. Used by load_task.
nlohmann::json derived_from_toml(const Task& task, const nlohmann::json& torch_table,
                                 const std::string& problem_path);

/// Loads a PyTorch problem file as a task: derive_torch_task then task_from_derived.
Task load_torch_task(const std::string& path);

/// The derived task of a PyTorch task as JSON (the format task_from_derived reads), with the
/// task's own signature, workloads and tolerance. Requires task.torch_reference.
nlohmann::json derived_json(const Task& task);

}  // namespace kforge

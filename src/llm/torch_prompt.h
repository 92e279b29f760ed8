// What a model is told about a task whose reference is a PyTorch module (docs/torch_tasks.md):
// where each signature tensor and scalar of `kforge_run` lives in the module, its dtype and
// symbolic shape, where its values come from (the derived task's input_rules), and which module
// constants each workload rebinds. The module's source itself is shown beside it
// (prompts/task.md), as KernelBench's prompts show it.
#pragma once

#include <string>

#include "core/task.h"

namespace kforge::llm {

/// The mapping of `task`'s signature onto its PyTorch module, as a Markdown list, from
/// task.torch_reference (the derived task JSON: `torch.tensors`, `torch.scalars`,
/// `torch.workloads`, `input_rules`, `double_reference`). One line per tensor, e.g.
///   - `args->inputs[1]` = `linear_weight`: f32 [out_features, in_features]; the module's
///     parameter `linear.weight`; values made by kforge's generator (a float parameter ...)
/// then one per scalar, then what the workloads rebind and how the outputs are checked.
/// Empty for a task without a torch reference. Entries the JSON lacks are left unsaid (a task
/// read back from TOML has no input_rules); it never throws on a well-formed derived task.
std::string describe_torch_mapping(const Task& task);

/// Which module constants each workload rebinds, one clause per workload ("'gate_small'
/// rebinds batch_size=3, dim=37; 'problem' uses the file's own values"); "" for a task without
/// a torch reference.
std::string describe_workload_constants(const Task& task);

}  // namespace kforge::llm

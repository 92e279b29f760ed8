// torch.extents of a PyTorch task: signature symbols that no tensor the module is given holds,
// computed from others (a transposed convolution's output height), checked against the task.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/task.h"

namespace kforge {

/// Checks `extents` (the value of torch.extents: symbol -> {"const": int, "terms": [[coef,
/// symbol], ...], "div": int >= 1 (optional, default 1)}, meaning symbol = floor((const + sum
/// of coef x symbol) / div): a convolution's output height is
/// floor((h + 2 padding - dilation (kh - 1) - 1) / stride) + 1) against `task`: each key and
/// each term's symbol a symbol of the signature's shapes, whole-number coefficients, no symbol
/// defined through itself, and the rule giving the workload's value at every workload.
/// A solution (python/kforge_torch/solution_plan.py) sizes its outputs with these rules.
/// Throws Error naming `where`.extents.<symbol> and what was expected otherwise.
void validate_extents(const Task& task, const nlohmann::json& extents, const std::string& where);

}  // namespace kforge

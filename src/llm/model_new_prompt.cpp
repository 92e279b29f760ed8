#include "llm/model_new_prompt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "backends/backend.h"
#include "evaluation/model_new_check.h"
#include "evaluation/python_policy.h"
#include "llm/torch_prompt.h"

namespace kforge::llm {
namespace {
using nlohmann::json;

const json& member(const json& object, const char* key) {
  static const json null;
  if (!object.is_object()) return null;
  auto it = object.find(key);
  return it != object.end() ? *it : null;
}

std::string kernel_kind(KernelLanguage language, const std::string& backend) {
  if (language == KernelLanguage::triton) return "Triton kernels";
  return backends::get_backend(backend).prompt.model_new_kind;
}

std::string language_rules(KernelLanguage language, const std::string& backend) {
  if (language == KernelLanguage::triton) {
    return "- Write the kernels in Triton (`import triton`, `import triton.language as tl`, "
           "`@triton.jit`) and launch them from `forward` with a grid over the output; they run "
           "on PyTorch's current stream.\n"
           "- A kernel that fails to compile at one workload's shapes fails the candidate: mask "
           "the tails (`mask=offsets < n`), and pass sizes as arguments, not as constants of the "
           "module.";
  }
  return backends::get_backend(backend).prompt.model_new_rules;
}

// "f32 [48, 192]": the module's shape of signature tensor `i` at the timed workload.
std::string shape_at_timed(const Task& task, const json& torch, size_t i) {
  const TensorSpec& spec = task.signature.tensors[i];
  for (const Workload& w : task.workloads) {
    if (!w.timed) continue;
    const json& shapes = member(member(member(torch, "workloads"), w.name.c_str()), "shapes");
    if (!shapes.is_array() || i >= shapes.size() || !shapes[i].is_array()) break;
    std::vector<std::string> dims;
    for (const json& d : shapes[i]) dims.push_back(d.dump());
    return fmt::format("{} [{}] at the timed workload", to_string(spec.dtype),
                       fmt::join(dims, ", "));
  }
  return to_string(spec.dtype);
}

std::string values_note(const json& derived, const std::string& name) {
  const json& rules = member(derived, "input_rules");
  if (!rules.is_array()) return "";
  for (const json& rule : rules) {
    if (!rule.is_object() || rule.value("tensor", "") != name) continue;
    return rule.value("rule", "") == "problem"
               ? "; its values come from the problem's own `get_inputs()` / `Model()` under "
                 "kforge's seed"
               : "; kforge fills it with its own values (several distributions and seeds)";
  }
  return "";
}

std::vector<std::string> tensor_lines(const Task& task) {
  const json& torch = member(task.torch_reference, "torch");
  const json& entries = member(torch, "tensors");
  std::vector<std::string> inputs, held, outputs;
  for (size_t i = 0; i < task.signature.tensors.size(); ++i) {
    const TensorSpec& spec = task.signature.tensors[i];
    const json& entry = entries.is_array() && i < entries.size() ? entries[i] : json();
    const std::string source = entry.is_object() ? entry.value("source", "") : "";
    const int index = entry.is_object() ? entry.value("index", 0) : 0;
    const std::string shape = shape_at_timed(task, torch, i);
    if (source == "parameter" || source == "buffer") {
      held.push_back(fmt::format("- {} `{}`: {}{}", source, entry.value("name", spec.name), shape,
                                 values_note(task.torch_reference, spec.name)));
    } else if (source == "output" || spec.role == TensorRole::output) {
      outputs.push_back(fmt::format("- `forward` returns, as output {}: {}", index, shape));
    } else {
      inputs.push_back(fmt::format("- `forward` argument {} (`{}`): {}{}", index, spec.name, shape,
                                   values_note(task.torch_reference, spec.name)));
    }
  }
  std::vector<std::string> lines = inputs;
  lines.insert(lines.end(), held.begin(), held.end());
  lines.insert(lines.end(), outputs.begin(), outputs.end());
  for (const ScalarSpec& s : task.signature.scalars) {
    lines.push_back(fmt::format("- the number `{}` = {} ({})", s.name, s.value, to_string(s.dtype)));
  }
  return lines;
}

}  // namespace

PromptValues model_new_values(const Task& task, KernelLanguage language,
                              const std::string& backend, const std::string& problem_source) {
  PromptValues values;
  values["kernel_kind"] = kernel_kind(language, backend);
  values["language_rules"] = language_rules(language, backend);
  const evaluation::PythonClassShape model = evaluation::python_class_shape(problem_source, "Model");
  values["model_init"] = model.has_init ? model.init_text : "(self)";
  values["model_tensors"] = fmt::format("{}", fmt::join(tensor_lines(task), "\n"));
  values["workload_sizes"] = describe_workload_constants(task);
  std::vector<std::string> ops;
  for (const std::string& op : evaluation::forbidden_torch_ops(task.family, problem_source)) {
    ops.push_back("`" + op + "`");
  }
  values["forbidden_ops"] = fmt::format("{}", fmt::join(ops, ", "));
  return values;
}

}  // namespace kforge::llm

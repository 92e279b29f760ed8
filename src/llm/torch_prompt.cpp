#include "llm/torch_prompt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <vector>

namespace kforge::llm {
namespace {
using nlohmann::json;

// `key` of `object` when it is an array/object of the wanted kind, else an empty one.
const json& array_at(const json& object, const char* key) {
  static const json empty = json::array();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : empty;
}
const json& object_at(const json& object, const char* key) {
  static const json empty = json::object();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : empty;
}

int index_of(const json& entry) {
  auto it = entry.find("index");
  return it != entry.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// Where signature tensor `spec` lives in the module, from its `torch.tensors` entry.
std::string module_place(const json& entry, const TensorSpec& spec, int outputs) {
  const std::string source = entry.value("source", "");
  const std::string name = entry.value("name", spec.name);
  if (source == "input") {
    return fmt::format("argument {0} of `forward` (element {0} of `get_inputs()`)",
                       index_of(entry));
  }
  if (source == "parameter") return "the module's parameter `" + name + "` (`named_parameters()`)";
  if (source == "buffer") return "the module's buffer `" + name + "` (`named_buffers()`)";
  if (source == "output") {
    return outputs == 1 ? std::string("what `forward` returns")
                        : fmt::format("element {} of what `forward` returns", index_of(entry));
  }
  return "source '" + source + "'";
}

// "values made by kforge's generator (why)" / "values from the problem itself (why)".
std::string values_from(const json& rule) {
  const std::string kind = rule.value("rule", "");
  const std::string why = rule.value("why", "");
  const std::string because = why.empty() ? "" : " (" + why + ")";
  if (kind == "generated") {
    return "values made by kforge's generator, several distributions and seeds" + because;
  }
  if (kind == "problem") {
    return "values from the problem's own `get_inputs()` / `Model()` under kforge's seed" +
           because;
  }
  return "values: " + kind + because;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + fmt::format("{}", fmt::join(dims, ", ")) + "]";
}

// When the module holds tensor `i` in another shape than the signature's at the timed workload
// (a family's view, e.g. NCHW seen as [rows, cols]): says so.
std::string view_note(const Task& task, const json& workloads, size_t i) {
  for (const Workload& w : task.workloads) {
    if (!w.timed) continue;
    const json& shapes = array_at(object_at(workloads, w.name.c_str()), "shapes");
    if (i >= shapes.size() || !shapes[i].is_array()) return "";
    std::vector<int64_t> module_shape;
    for (const json& d : shapes[i]) module_shape.push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
    std::vector<int64_t> signature_shape;
    try {
      signature_shape = bind_shape(task.signature.tensors[i], w);
    } catch (...) {
      return "";
    }
    if (module_shape == signature_shape) return "";
    return fmt::format(
        "; the module holds it as {} at workload '{}' (the same elements, contiguous row-major: "
        "the signature's shape is a view of it)",
        shape_text(module_shape), w.name);
  }
  return "";
}

std::vector<std::string> tensor_lines(const Task& task, const json& torch,
                                      const std::map<std::string, json>& rules) {
  const json& entries = array_at(torch, "tensors");
  const json& workloads = object_at(torch, "workloads");
  int outputs = 0;
  for (const TensorSpec& t : task.signature.tensors) outputs += t.role == TensorRole::output;
  std::vector<std::string> lines;
  int next_input = 0, next_output = 0;
  for (size_t i = 0; i < task.signature.tensors.size(); ++i) {
    const TensorSpec& t = task.signature.tensors[i];
    const bool input = t.role == TensorRole::input;
    std::string line = fmt::format("- `args->{}[{}]` = `{}`: {} [{}]", input ? "inputs" : "outputs",
                                   input ? next_input++ : next_output++, t.name, to_string(t.dtype),
                                   fmt::join(t.shape, ", "));
    if (i < entries.size() && entries[i].is_object()) {
      line += "; " + module_place(entries[i], t, outputs);
    }
    if (auto rule = rules.find(t.name); rule != rules.end()) line += "; " + values_from(rule->second);
    line += view_note(task, workloads, i);
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> scalar_lines(const Task& task, const json& torch) {
  const json& entries = array_at(torch, "scalars");
  std::vector<std::string> lines;
  // An entry names its signature scalar (docs/torch_tasks.md); a task derived before names
  // existed pairs them by position.
  bool named = false;
  for (const json& e : entries) named = named || (e.is_object() && e.contains("name"));
  for (size_t k = 0; k < task.signature.scalars.size(); ++k) {
    const ScalarSpec& s = task.signature.scalars[k];
    const json* entry = nullptr;
    for (const json& e : entries) {
      if (e.is_object() && e.value("name", "") == s.name) entry = &e;
    }
    if (!named && k < entries.size() && entries[k].is_object()) entry = &entries[k];
    std::string place = "a constant of the module that kforge found by testing (e.g. a norm's eps)";
    const std::string source = entry ? entry->value("source", "") : "";
    if (source == "input") {
      place = fmt::format("argument {0} of `forward` (element {0} of `get_inputs()`)",
                          index_of(*entry));
    } else if (source == "attribute") {
      place = "the module's attribute `" + entry->value("attribute", "") +
              "` (kforge found the value by testing)";
    }
    lines.push_back(fmt::format("- `args->scalars[{}]` = `{}` = {} ({}, passed as double); {}", k,
                                s.name, s.value, to_string(s.dtype), place));
  }
  return lines;
}

// "gate_small rebinds batch_size=3, in_features=37; problem uses the file's own values".
std::string constants_line(const Task& task, const json& torch) {
  const json& workloads = object_at(torch, "workloads");
  std::vector<std::string> parts;
  for (const Workload& w : task.workloads) {
    const json& constants = object_at(object_at(workloads, w.name.c_str()), "constants");
    if (constants.empty()) {
      parts.push_back("'" + w.name + "' uses the file's own values");
      continue;
    }
    std::vector<std::string> bound;
    for (const auto& [name, value] : constants.items()) bound.push_back(name + "=" + value.dump());
    parts.push_back(fmt::format("'{}' rebinds {}", w.name, fmt::join(bound, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::string describe_workload_constants(const Task& task) {
  if (!task.has_torch_reference()) return "";
  return constants_line(task, object_at(task.torch_reference, "torch"));
}

std::string describe_torch_mapping(const Task& task) {
  if (!task.has_torch_reference()) return "";
  const json& derived = task.torch_reference;
  const json& torch = object_at(derived, "torch");
  std::map<std::string, json> rules;
  for (const json& rule : array_at(derived, "input_rules")) {
    if (rule.is_object()) rules[rule.value("tensor", "")] = rule;
  }
  std::vector<std::string> lines = {
      "`kforge_run` receives the module's tensors as DLTensors and its number arguments as "
      "scalars, in this order (shapes in the signature's symbols, bound per workload above):",
      ""};
  for (std::string& line : tensor_lines(task, torch, rules)) lines.push_back(std::move(line));
  for (std::string& line : scalar_lines(task, torch)) lines.push_back(std::move(line));
  lines.push_back("");
  lines.push_back(
      "- Parameters and buffers arrive as inputs like `forward`'s arguments: read them and never "
      "assume their values (no PyTorch initialization to rely on): the module runs with exactly "
      "the values your kernel receives.");
  if (const std::string constants = constants_line(task, torch); !constants.empty()) {
    lines.push_back(
        "- The module-level size constants in the file are those of the timed workload; the other "
        "workloads rebind them, so take every size from the DLTensor shapes, never from the "
        "file: " + constants + ".");
  }
  if (torch.value("double_reference", false)) {
    lines.push_back(
        "- The expected outputs are the module's in float64 (`model.double()` on the same inputs), "
        "cast to the output dtype; the tolerance above applies to them.");
  }
  if (torch.value("fp32_model", false) && torch.value("double_reference", false) &&
      task.precision == "fp32") {
    lines.push_back(
        "- fp32 accuracy is required: each output's RMS error against that float64 result may "
        "be at most " + fmt::format("{:g}", task.precision_max_ratio) +
        "x that of the module run in plain fp32. TF32 or bf16 tensor cores (or inputs rounded "
        "to fewer bits) err hundreds of times more and are rejected; fp32 FMA, or tensor cores "
        "through a split such as 3xTF32 (a = hi + lo, three TF32 MMAs, fp32 accumulation), pass.");
  }
  return fmt::format("{}", fmt::join(lines, "\n"));
}

}  // namespace kforge::llm

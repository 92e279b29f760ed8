// torch_task_toml (torch_task.h): a PyTorch task written as a TOML task file that load_task reads
// back. Written as text rather than through toml++'s serializer so that the tables come in the
// order a person reads a task (signature, workloads, tolerance, then the module mapping) with
// the derivation's notes as comments.
#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "common/error.h"
#include "task/torch_task.h"

namespace kforge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A TOML basic string: JSON's escapes (\", \\, \n, \uXXXX) are valid TOML escapes too.
std::string quoted(const std::string& text) { return json(text).dump(); }

std::string number(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // TOML floats need . or e
  return text;
}

// An inline TOML value for a JSON value (objects become inline tables).
std::string inline_value(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return quoted(value.get<std::string>());
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return std::to_string(value.get<int64_t>());
    case json::value_t::number_float:
      return number(value.get<double>());
    case json::value_t::array: {
      std::string text = "[";
      for (size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + inline_value(value[i]);
      return text + "]";
    }
    case json::value_t::object: {
      std::string text = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        text += (first ? "" : ", ") + quoted(key) + " = " + inline_value(item);
        first = false;
      }
      return text + "}";
    }
    default:
      throw Error("cannot write " + value.dump() + " as a TOML value");
  }
}

void write_comment_lines(std::ostringstream& out, const json& derived, const std::string& key) {
  if (!derived.contains(key) || !derived.at(key).is_array()) return;
  for (const json& line : derived.at(key)) {
    if (line.is_string()) out << "# " << key.substr(0, key.size() - 1) << ": " << line.get<std::string>() << "\n";
  }
}

void write_tensors(std::ostringstream& out, const Task& task, TensorRole role) {
  for (const TensorSpec& tensor : task.signature.tensors) {
    if (tensor.role != role) continue;
    out << "\n[[" << (role == TensorRole::input ? "inputs" : "outputs") << "]]\n";
    out << "name = " << quoted(tensor.name) << "\n";
    out << "dtype = " << quoted(to_string(tensor.dtype)) << "\n";
    out << "shape = " << inline_value(json(tensor.shape)) << "\n";
    if (tensor.strided) out << "strided = true\n";
    if (tensor.provided) out << "provided = true  # values from the problem's get_inputs()\n";
  }
}

}  // namespace

std::string torch_task_toml(const Task& task, const std::string& toml_dir) {
  if (!task.has_torch_reference()) throw Error(task.source_path + ": not a PyTorch task");
  const json& derived = task.torch_reference;
  std::ostringstream out;
  const std::string problem = derived.value("problem", "");
  out << "# Derived by kforge from " << problem << ".\n"
      << "# Workloads, tolerance and distributions may be edited; [torch] maps each signature tensor\n"
      << "# onto the module (and must list every workload's constants and module shapes).\n";
  if (derived.contains("family_match") && derived.at("family_match").is_object()) {
    const json& match = derived.at("family_match");
    out << "# family " << match.value("family", "") << ": " << match.value("adapter", "") << " ("
        << match.value("checked", "") << ")\n";
  }
  if (derived.contains("input_rules") && derived.at("input_rules").is_array()) {
    for (const json& rule : derived.at("input_rules")) {
      out << "# input " << rule.value("tensor", "") << ": " << rule.value("rule", "") << " ("
          << rule.value("why", "") << ")\n";
    }
  }
  write_comment_lines(out, derived, "notes");
  write_comment_lines(out, derived, "warnings");
  out << "name = " << quoted(task.name) << "\n";
  out << "family = " << quoted(task.family) << "\n";
  out << "description = " << quoted(task.description) << "\n";
  if (!task.flops_formula.empty()) out << "flops = " << quoted(task.flops_formula) << "\n";
  if (!task.bytes_formula.empty()) out << "bytes = " << quoted(task.bytes_formula) << "\n";
  out << "distributions = " << inline_value(json(task.distributions)) << "\n";
  if (!task.epilogue.empty()) out << "epilogue = " << inline_value(json(task.epilogue)) << "\n";
  write_tensors(out, task, TensorRole::input);
  write_tensors(out, task, TensorRole::output);
  for (const ScalarSpec& scalar : task.signature.scalars) {
    // An integer scalar (a convolution's stride) reads as an integer; any other as a float.
    const bool integral = (scalar.dtype == DType::i32 || scalar.dtype == DType::i64) &&
                          scalar.value == std::floor(scalar.value) && std::abs(scalar.value) < 1e15;
    out << "\n[[scalars]]\nname = " << quoted(scalar.name) << "\ndtype = "
        << quoted(to_string(scalar.dtype)) << "\nvalue = "
        << (integral ? fmt::format("{}", static_cast<int64_t>(scalar.value))
                     : number(scalar.value))
        << "\n";
  }
  for (const Workload& workload : task.workloads) {
    out << "\n[[workloads]]\nname = " << quoted(workload.name) << "\n";
    for (const auto& [symbol, value] : workload.dims) out << symbol << " = " << value << "\n";
    if (workload.timed) out << "timed = true\n";
  }
  out << "\n[tolerance]\nrtol = " << number(task.tolerance.rtol)
      << "\natol = " << number(task.tolerance.atol) << "\n";
  if (task.tolerance.normalized) out << "normalized = " << number(*task.tolerance.normalized) << "\n";
  if (!task.tolerance.workload_atol.empty()) {
    out << "\n[tolerance.workload_atol]\n";
    for (const auto& [workload, atol] : task.tolerance.workload_atol) {
      out << quoted(workload) << " = " << number(atol) << "\n";
    }
  }
  fs::path problem_path(problem);
  const fs::path relative =
      toml_dir.empty() ? fs::path()
                       : problem_path.lexically_relative(fs::absolute(toml_dir).lexically_normal());
  const bool below = !relative.empty() && relative.begin()->string() != "..";
  out << "\n[reference]\ntorch = " << quoted(below ? relative.string() : problem) << "\n";
  const json& torch_section = derived.at("torch");
  out << "\n[torch]\n";
  if (derived.contains("problem_sha256")) {
    out << "problem_sha256 = " << quoted(derived.at("problem_sha256").get<std::string>()) << "\n";
  }
  for (const auto& [key, value] : torch_section.items()) {
    if (key == "workloads") continue;
    out << key << " = " << inline_value(value) << "\n";
  }
  // Why no family (or an earlier one) matched: what `kforge optimize` of this TOML says when
  // no family computes the module, as it does for the problem file itself (the suite's
  // children run such TOMLs).
  if (derived.contains("family_misses") && derived.at("family_misses").is_object() &&
      !derived.at("family_misses").empty()) {
    out << "\n[torch.family_misses]\n";
    for (const auto& [family, why] : derived.at("family_misses").items()) {
      out << quoted(family) << " = " << inline_value(why) << "\n";
    }
  }
  // Where each input's values come from: the LLM prompt tells the model (llm/torch_prompt.h).
  if (derived.contains("input_rules") && derived.at("input_rules").is_array()) {
    for (const json& rule : derived.at("input_rules")) {
      if (!rule.is_object()) continue;
      out << "\n[[torch.input_rules]]\n";
      for (const auto& [key, value] : rule.items()) out << key << " = " << inline_value(value) << "\n";
    }
  }
  for (const auto& [name, entry] : torch_section.at("workloads").items()) {
    out << "\n[torch.workloads." << quoted(name) << "]\n";
    for (const auto& [key, value] : entry.items()) out << key << " = " << inline_value(value) << "\n";
  }
  return out.str();
}

}  // namespace kforge

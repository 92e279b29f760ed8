#include "generation/templates_generator.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/error.h"
#include "common/files.h"

namespace kforge::generation {
namespace {

// Allowed values in numeric order when they are all numbers, else as listed.
std::vector<std::string> ordered_values(const TemplateParam& param) {
  std::vector<std::string> values = param.values;
  bool numeric = std::all_of(values.begin(), values.end(), [](const std::string& v) {
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    return !v.empty() && *end == '\0';
  });
  if (numeric) {
    std::sort(values.begin(), values.end(), [](const std::string& a, const std::string& b) {
      return std::strtod(a.c_str(), nullptr) < std::strtod(b.c_str(), nullptr);
    });
  }
  return values;
}

bool switch_variant(const KernelFamily& family, TemplatePoint& point, const std::string& target) {
  const TemplateVariant* next = family.variant(target);
  if (next == nullptr || next->name == point.variant) return false;
  TemplatePoint switched = default_point(*next);
  // Parameters both variants share keep their value when it is allowed in the new one.
  for (auto& [name, value] : switched.params) {
    auto old = point.params.find(name);
    const TemplateParam* param = next->param(name);
    if (old != point.params.end() &&
        std::find(param->values.begin(), param->values.end(), old->second) != param->values.end()) {
      value = old->second;
    }
  }
  point = switched;
  return true;
}

}  // namespace

bool apply_edit(const KernelFamily& family, TemplatePoint& point, const memory::ParamEdit& edit) {
  if (edit.op == "variant") return switch_variant(family, point, edit.value);
  const TemplateVariant* variant = family.variant(point.variant);
  if (variant == nullptr) return false;
  const TemplateParam* param = variant->param(edit.param);
  if (param == nullptr) return false;
  std::vector<std::string> values = ordered_values(*param);
  std::string& current = point.params[edit.param];
  auto position = std::find(values.begin(), values.end(), current);
  if (position == values.end()) return false;
  std::string next = current;
  if (edit.op == "set") {
    if (std::find(values.begin(), values.end(), edit.value) == values.end()) return false;
    next = edit.value;
  } else if (edit.op == "increase") {
    if (position + 1 == values.end()) return false;
    next = *(position + 1);
  } else if (edit.op == "decrease") {
    if (position == values.begin()) return false;
    next = *(position - 1);
  } else if (edit.op == "max") {
    next = values.back();
  } else if (edit.op == "min") {
    next = values.front();
  } else {
    throw Error("unknown edit op '" + edit.op +
                "' (expected set, increase, decrease, max, min or variant)");
  }
  if (next == current) return false;
  current = next;
  return true;
}

TemplatesGenerator::TemplatesGenerator(KernelFamily family, std::string dtype)
    : family_(for_dtype(family, dtype)), dtype_(std::move(dtype)) {}

TemplatesGenerator::TemplatesGenerator(KernelFamily family, std::string dtype,
                                       std::string model_new_shell)
    : family_(for_dtype(family, dtype)),
      dtype_(std::move(dtype)),
      model_new_shell_(std::move(model_new_shell)) {
  const std::string marker = std::string(kKernelModuleMarker) + "\n";
  const size_t at = model_new_shell_.find(marker);
  if (at == std::string::npos || model_new_shell_.find(marker, at + 1) != std::string::npos) {
    throw Error("the ModelNew shell of family '" + family_.family + "' must hold the line '" +
                kKernelModuleMarker + "' exactly once (python/kforge_torch/solution_shell.py "
                "writes it)");
  }
}

Proposal TemplatesGenerator::make_proposal(const TemplatePoint& point) const {
  const TemplateVariant* variant = family_.variant(point.variant);
  if (variant == nullptr) throw Error("unknown variant '" + point.variant + "'");
  Proposal proposal;
  proposal.point = point;
  proposal.id = point.id();
  proposal.job.backend = family_.backend;
  proposal.job.source = read_file(variant->source_path);
  proposal.job.source_name = variant->source_path.substr(variant->source_path.rfind('/') + 1);
  proposal.job.cuda_arch = variant->cuda_arch;
  for (const auto& [name, value] : point.params) {
    const TemplateParam* param = variant->param(name);
    if (param == nullptr ||
        std::find(param->values.begin(), param->values.end(), value) == param->values.end()) {
      throw Error("variant '" + variant->name + "': parameter " + name + "=" + value +
                  " is not allowed");
    }
    proposal.job.defines["KF_" + name] = value;
  }
  if (!model_new_shell_.empty()) {
    // A Python kernel module: its knobs are module constants, written in above its text, and
    // the module goes where the shell's marker line is. The element type needs no knob: Triton
    // kernels specialize on their tensors' types.
    std::string module = "# kernels/triton/" + family_.family + "/" + proposal.job.source_name +
                         " at " + point.id() + "\n";
    for (const auto& [name, value] : proposal.job.defines) module += name + " = " + value + "\n";
    module += proposal.job.source;
    std::string text = model_new_shell_;
    text.replace(text.find(kKernelModuleMarker), std::string(kKernelModuleMarker).size(),
                 module);
    proposal.job.source = std::move(text);
    proposal.job.defines.clear();
    return proposal;
  }
  for (const auto& [name, value] : task_defines_) proposal.job.defines[name] = value;
  // f32 builds keep the sources' default, so their artifacts and ids are unchanged.
  if (dtype_ != "f32") proposal.job.defines["KF_DTYPE"] = dtype_define(dtype_);
  return proposal;
}

std::map<std::string, int64_t> largest_dims(const std::vector<Workload>& workloads) {
  std::map<std::string, int64_t> largest;
  for (const Workload& workload : workloads) {
    for (const auto& [dim, size] : workload.dims) {
      largest[dim] = std::max(largest[dim], size);
    }
  }
  return largest;
}

std::vector<std::string> TemplatesGenerator::set_task_dims(
    const std::map<std::string, int64_t>& largest) {
  std::vector<std::string> left_out;
  std::vector<TemplateVariant> kept;
  for (TemplateVariant& variant : family_.variants) {
    std::string why;
    for (const auto& [dim, limit] : variant.max_dims) {
      const auto size = largest.find(dim);
      if (size != largest.end() && size->second > limit) {
        why = fmt::format("{}: {} = {} exceeds its {}", variant.name, dim, size->second, limit);
        break;
      }
    }
    if (why.empty()) {
      kept.push_back(std::move(variant));
    } else {
      left_out.push_back(why);
    }
  }
  if (kept.empty()) {
    std::string all;
    for (const std::string& why : left_out) all += (all.empty() ? "" : "; ") + why;
    throw Error("no variant of family '" + family_.family + "' computes this task's sizes (" +
                all + ")");
  }
  family_.variants = std::move(kept);
  return left_out;
}

std::vector<Proposal> TemplatesGenerator::initial_proposals() {
  std::vector<Proposal> proposals;
  std::set<std::string> decompositions;
  for (const TemplateVariant& variant : family_.variants) {
    if (!decompositions.insert(variant.decomposition).second) continue;
    Proposal proposal = make_proposal(default_point(variant));
    proposal.change = "expert hint: " + variant.decomposition + " (" + variant.description + ")";
    proposals.push_back(std::move(proposal));
  }
  return proposals;
}

std::optional<Proposal> TemplatesGenerator::apply(const Proposal& parent,
                                                  const memory::Strategy& strategy) {
  TemplatePoint point = parent.point;
  std::vector<std::string> changes;
  for (const memory::ParamEdit& edit : strategy.edits) {
    TemplatePoint before = point;
    if (!apply_edit(family_, point, edit)) continue;
    if (edit.op == "variant") {
      changes.push_back("variant " + before.variant + " -> " + point.variant);
    } else {
      changes.push_back(edit.param + " " + before.params[edit.param] + " -> " +
                        point.params[edit.param]);
    }
  }
  if (changes.empty() || point == parent.point) return std::nullopt;
  Proposal proposal = make_proposal(point);
  proposal.parent_id = parent.id;
  std::string change = strategy.id + ": ";
  for (size_t i = 0; i < changes.size(); ++i) change += (i ? ", " : "") + changes[i];
  proposal.change = change;
  return proposal;
}

std::string TemplatesGenerator::standalone_source(const Proposal& proposal) const {
  if (!model_new_shell_.empty()) return proposal.job.source;  // a whole module, knobs written in
  std::ostringstream text;
  // An architecture-specific target first: python/kforge_torch/solution_source.py reads it.
  if (!proposal.job.cuda_arch.empty()) {
    text << "// kforge: nvcc target " << proposal.job.cuda_arch << "\n";
  }
  text << "// kforge candidate " << proposal.id << " (family " << family_.family << ", backend "
       << family_.backend << ")\n";
  for (const auto& [name, value] : proposal.job.defines) {
    text << "#define " << name << " " << value << "\n";
  }
  text << proposal.job.source;
  return text.str();
}

}  // namespace kforge::generation

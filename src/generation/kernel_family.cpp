#include "generation/kernel_family.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <toml++/toml.h>

#include "common/error.h"

namespace kforge::generation {
namespace fs = std::filesystem;

const TemplateParam* TemplateVariant::param(const std::string& name) const {
  for (const TemplateParam& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const TemplateVariant* KernelFamily::variant(const std::string& name_or_decomposition) const {
  for (const TemplateVariant& v : variants) {
    if (v.name == name_or_decomposition) return &v;
  }
  for (const TemplateVariant& v : variants) {
    if (v.decomposition == name_or_decomposition) return &v;
  }
  return nullptr;
}

namespace {

std::string required_string(const toml::table& table, const char* key, const std::string& where) {
  auto value = table[key].value<std::string>();
  if (!value) throw Error(where + "." + key + ": missing (expected a string)");
  return *value;
}

// One parameter's value list; `where` names the field ("...params.VEC").
TemplateParam read_param(const std::string& name, const toml::node& node,
                         const std::string& where) {
  TemplateParam param;
  param.name = name;
  const toml::array* values = node.as_array();
  if (values == nullptr || values->empty()) {
    throw Error(where + ": expected a non-empty array of values");
  }
  for (const toml::node& value : *values) {
    if (auto integer = value.value<int64_t>()) {
      param.values.push_back(std::to_string(*integer));
    } else if (auto text = value.value<std::string>()) {
      param.values.push_back(*text);
    } else {
      throw Error(where + ": values must be integers or strings");
    }
  }
  return param;
}

std::vector<std::string> read_dtypes(const toml::node& node, const std::string& where) {
  const toml::array* dtypes = node.as_array();
  if (dtypes == nullptr || dtypes->empty()) {
    throw Error(where + ".dtypes: expected a non-empty array of \"f32\", \"f16\", \"bf16\"");
  }
  std::vector<std::string> result;
  for (const toml::node& value : *dtypes) {
    auto text = value.value<std::string>();
    if (!text || (*text != "f32" && *text != "f16" && *text != "bf16")) {
      throw Error(where + ".dtypes: values must be \"f32\", \"f16\" or \"bf16\"");
    }
    result.push_back(*text);
  }
  return result;
}

// [variants.params_by_dtype.<dtype>]: each type must be one the variant takes and each
// parameter one of its params, so that a misspelt key cannot be silently ignored.
void read_params_by_dtype(const toml::node& node, const std::string& where,
                          TemplateVariant& variant) {
  const toml::table* by_dtype = node.as_table();
  if (by_dtype == nullptr) {
    throw Error(where + ".params_by_dtype: expected a table of element types");
  }
  for (const auto& [key, dtype_node] : *by_dtype) {
    const std::string dtype(key.str());
    const std::string field = where + ".params_by_dtype." + dtype;
    if (std::find(variant.dtypes.begin(), variant.dtypes.end(), dtype) == variant.dtypes.end()) {
      std::string list;
      for (const std::string& name : variant.dtypes) list += (list.empty() ? "" : ", ") + name;
      throw Error(field + ": '" + dtype + "' is not one of the variant's dtypes (" + list + ")");
    }
    const toml::table* params = dtype_node.as_table();
    if (params == nullptr) throw Error(field + ": expected a table of parameter value lists");
    std::vector<TemplateParam>& overrides = variant.params_by_dtype[dtype];
    for (const auto& [name_key, values] : *params) {
      const std::string name(name_key.str());
      if (variant.param(name) == nullptr) {
        throw Error(field + "." + name + ": not a parameter of the variant (not in its params)");
      }
      overrides.push_back(read_param(name, values, field + "." + name));
    }
  }
}

TemplateVariant read_variant(const toml::table& table, const fs::path& dir,
                             const std::string& where) {
  TemplateVariant variant;
  variant.name = required_string(table, "name", where);
  variant.source_path = (dir / required_string(table, "source", where)).string();
  if (!fs::exists(variant.source_path)) {
    throw Error(where + ".source: file '" + variant.source_path + "' does not exist");
  }
  variant.decomposition = table["decomposition"].value_or(variant.name);
  variant.description = table["description"].value_or(std::string());
  if (const toml::node* node = table.get("cuda_arch")) {
    variant.cuda_arch = node->value_or(std::string());
    if (variant.cuda_arch.empty()) {
      throw Error(where + ".cuda_arch: expected an nvcc target such as \"sm_90a\"");
    }
  }
  if (const toml::node* node = table.get("dtypes")) variant.dtypes = read_dtypes(*node, where);
  if (const toml::table* params = table["params"].as_table()) {
    for (const auto& [key, node] : *params) {
      const std::string name(key.str());
      variant.params.push_back(read_param(name, node, where + ".params." + name));
    }
  }
  if (const toml::node* node = table.get("params_by_dtype")) {
    read_params_by_dtype(*node, where, variant);
  }
  if (const toml::node* node = table.get("max_dims")) {
    const toml::table* limits = node->as_table();
    if (limits == nullptr) throw Error(where + ".max_dims: expected a table of dim = size");
    for (const auto& [key, value] : *limits) {
      const std::optional<int64_t> size = value.value<int64_t>();
      if (!value.is_integer() || !size || *size < 1) {
        throw Error(where + ".max_dims." + std::string(key.str()) +
                    ": expected a positive integer (the largest size of that dim)");
      }
      variant.max_dims[std::string(key.str())] = *size;
    }
  }
  return variant;
}

// The variant with `dtype`'s value lists in place of the defaults, overrides consumed.
TemplateVariant resolved_for(const TemplateVariant& variant, const std::string& dtype) {
  TemplateVariant result = variant;
  result.params_by_dtype.clear();
  auto overrides = variant.params_by_dtype.find(dtype);
  if (overrides == variant.params_by_dtype.end()) return result;
  for (TemplateParam& param : result.params) {
    for (const TemplateParam& override_param : overrides->second) {
      if (override_param.name == param.name) param.values = override_param.values;
    }
  }
  return result;
}

}  // namespace

KernelFamily load_family(const std::string& kernels_root, const std::string& backend,
                         const std::string& family) {
  fs::path dir = fs::path(kernels_root) / backend / family;
  fs::path path = dir / "family.toml";
  if (!fs::exists(path)) {
    throw Error("no built-in kernels for family '" + family + "' on backend '" + backend +
                "' (expected " + path.string() + ")");
  }
  toml::table root;
  try {
    root = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw Error(path.string() + ": not valid TOML: " + std::string(e.description()));
  }
  KernelFamily result;
  result.family = root["family"].value_or(family);
  result.backend = root["backend"].value_or(backend);
  const toml::array* variants = root["variants"].as_array();
  if (variants == nullptr || variants->empty() || !variants->is_array_of_tables()) {
    throw Error(path.string() + ": variants: expected [[variants]] entries");
  }
  for (size_t i = 0; i < variants->size(); ++i) {
    std::string where = path.string() + ": variants[" + std::to_string(i) + "]";
    result.variants.push_back(read_variant(*(*variants)[i].as_table(), dir, where));
  }
  return result;
}

KernelFamily for_dtype(const KernelFamily& family, const std::string& dtype) {
  KernelFamily result = family;
  result.variants.clear();
  std::set<std::string> supported;
  for (const TemplateVariant& variant : family.variants) {
    supported.insert(variant.dtypes.begin(), variant.dtypes.end());
    if (std::find(variant.dtypes.begin(), variant.dtypes.end(), dtype) != variant.dtypes.end()) {
      result.variants.push_back(resolved_for(variant, dtype));
    }
  }
  if (result.variants.empty()) {
    std::string list;
    for (const std::string& name : supported) list += (list.empty() ? "" : ", ") + name;
    throw Error("the built-in " + family.backend + " kernels of family '" + family.family +
                "' do not take " + dtype + " inputs (their variants take: " + list + ")");
  }
  return result;
}

std::string dtype_define(const std::string& dtype) {
  if (dtype == "f32") return "KF_DTYPE_F32";
  if (dtype == "f16") return "KF_DTYPE_F16";
  if (dtype == "bf16") return "KF_DTYPE_BF16";
  throw Error("no KF_DTYPE for element type '" + dtype + "' (expected f32, f16 or bf16)");
}

std::string TemplatePoint::id() const {
  std::string text = variant + "[";
  bool first = true;
  for (const auto& [name, value] : params) {
    if (!first) text += ",";
    text += name + "=" + value;
    first = false;
  }
  return text + "]";
}

TemplatePoint default_point(const TemplateVariant& variant) {
  TemplatePoint point;
  point.variant = variant.name;
  for (const TemplateParam& param : variant.params) point.params[param.name] = param.values[0];
  return point;
}

}  // namespace kforge::generation

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
  if (const toml::node* node = table.get("dtypes")) {
    const toml::array* dtypes = node->as_array();
    if (dtypes == nullptr || dtypes->empty()) {
      throw Error(where + ".dtypes: expected a non-empty array of \"f32\", \"f16\", \"bf16\"");
    }
    variant.dtypes.clear();
    for (const toml::node& value : *dtypes) {
      auto text = value.value<std::string>();
      if (!text || (*text != "f32" && *text != "f16" && *text != "bf16")) {
        throw Error(where + ".dtypes: values must be \"f32\", \"f16\" or \"bf16\"");
      }
      variant.dtypes.push_back(*text);
    }
  }
  if (const toml::table* params = table["params"].as_table()) {
    for (const auto& [key, node] : *params) {
      TemplateParam param;
      param.name = std::string(key.str());
      const toml::array* values = node.as_array();
      if (values == nullptr || values->empty()) {
        throw Error(where + ".params." + param.name + ": expected a non-empty array of values");
      }
      for (const toml::node& value : *values) {
        if (auto integer = value.value<int64_t>()) {
          param.values.push_back(std::to_string(*integer));
        } else if (auto text = value.value<std::string>()) {
          param.values.push_back(*text);
        } else {
          throw Error(where + ".params." + param.name + ": values must be integers or strings");
        }
      }
      variant.params.push_back(std::move(param));
    }
  }
  return variant;
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
      result.variants.push_back(variant);
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

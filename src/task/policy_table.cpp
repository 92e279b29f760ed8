#include "task/policy_table.h"

#include <utility>
#include <vector>

#include "common/error.h"

namespace kforge {

SourcePolicy parse_source_policy(const toml::table* table, const std::string& where) {
  SourcePolicy policy;
  if (table == nullptr) return policy;
  auto fail = [&](const std::string& field, const std::string& what) {
    throw Error(where + ": policy." + field + ": " + what);
  };
  auto strings = [&](const toml::node& node, const std::string& field) {
    const toml::array* array = node.as_array();
    if (array == nullptr) fail(field, "expected an array of strings");
    std::vector<std::string> values;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::value<std::string>* value = (*array)[i].as_string();
      if (value == nullptr) fail(field + "[" + std::to_string(i) + "]", "expected a string");
      values.push_back(value->get());
    }
    return values;
  };
  for (const auto& [key, node] : *table) {
    std::string name(key.str());
    if (name == "allow") {
      std::vector<std::string> names = strings(node, name);
      for (size_t i = 0; i < names.size(); ++i) {
        std::string field = name + "[" + std::to_string(i) + "]";
        PolicyCategory category = PolicyCategory::library_compute;
        try {
          category = parse_policy_category(names[i]);
        } catch (const Error& e) {
          fail(field, e.what());
        }
        if (category == PolicyCategory::source_size || category == PolicyCategory::task_pattern) {
          fail(field, "'" + names[i] + "' cannot be allowed (set max_source_bytes or forbid)");
        }
        if (category == PolicyCategory::harness_tampering ||
            category == PolicyCategory::reference_call) {
          fail(field, "'" + names[i] + "' cannot be allowed (it protects the measurement)");
        }
        policy.enabled.erase(category);
      }
    } else if (name == "forbid") {
      std::vector<std::string> patterns = strings(node, name);
      for (size_t i = 0; i < patterns.size(); ++i) {
        try {
          compile_task_pattern(patterns[i]);
        } catch (const Error& e) {
          fail(name + "[" + std::to_string(i) + "]", e.what());
        }
      }
      policy.extra_forbidden = std::move(patterns);
    } else if (name == "max_source_bytes") {
      const toml::value<int64_t>* bytes = node.as_integer();
      if (bytes == nullptr || bytes->get() <= 0) fail(name, "expected a positive integer");
      policy.max_source_bytes = bytes->get();
    } else {
      fail(name, "unknown key (expected allow, forbid or max_source_bytes)");
    }
  }
  return policy;
}

}  // namespace kforge

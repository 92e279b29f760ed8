#include "core/policy_settings.h"

#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

constexpr std::pair<PolicyCategory, const char*> kCategoryNames[] = {
    {PolicyCategory::library_compute, "library_compute"},
    {PolicyCategory::thread_creation, "thread_creation"},
    {PolicyCategory::stream_creation, "stream_creation"},
    {PolicyCategory::default_stream_launch, "default_stream_launch"},
    {PolicyCategory::l2_persistence, "l2_persistence"},
    {PolicyCategory::file_and_environment, "file_and_environment"},
    {PolicyCategory::process_control, "process_control"},
    {PolicyCategory::source_size, "source_size"},
    {PolicyCategory::task_pattern, "task_pattern"},
    {PolicyCategory::harness_tampering, "harness_tampering"},
    {PolicyCategory::reference_call, "reference_call"},
};

// Each `*`, `+` or `{n,}` outside a bracket expression repeats without bound.
bool has_unbounded_repeat(const std::string& pattern) {
  bool in_bracket = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (in_bracket) {
      in_bracket = c != ']';
    } else if (c == '[') {
      in_bracket = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;
    } else if (c == '*' || c == '+' ||
               (c == ',' && i + 1 < pattern.size() && pattern[i + 1] == '}')) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::regex compile_task_pattern(const std::string& pattern) {
  if (has_unbounded_repeat(pattern)) {
    throw Error("pattern '" + pattern + "' repeats without bound (*, + or {n,}); use {0,N}: " +
                "an unbounded repeat over a long line of untrusted source overflows the stack");
  }
  std::regex regex;
  try {
    regex = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw Error("pattern '" + pattern + "' is not a valid ECMAScript regex: " + e.what());
  }
  if (std::regex_match(std::string(), regex)) {
    throw Error("pattern '" + pattern + "' matches the empty string");
  }
  return regex;
}


std::string to_string(PolicyCategory category) {
  for (const auto& [value, name] : kCategoryNames) {
    if (value == category) return name;
  }
  throw Error("invalid PolicyCategory " + std::to_string(static_cast<int>(category)));
}

PolicyCategory parse_policy_category(const std::string& name) {
  std::string known;
  for (const auto& [value, known_name] : kCategoryNames) {
    if (name == known_name) return value;
    known += (known.empty() ? "" : ", ") + std::string(known_name);
  }
  throw Error("unknown policy category '" + name + "' (expected one of: " + known + ")");
}

const std::vector<PolicyCategory>& switchable_policy_categories() {
  static const std::vector<PolicyCategory> categories = {
      PolicyCategory::library_compute, PolicyCategory::thread_creation,
      PolicyCategory::stream_creation, PolicyCategory::default_stream_launch,
      PolicyCategory::l2_persistence,  PolicyCategory::file_and_environment,
      PolicyCategory::process_control,
  };
  return categories;
}

}  // namespace kforge

#include "core/baseline.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

constexpr std::array<std::pair<BaselineKind, const char*>, 2> kKindNames = {{
    {BaselineKind::eager, "eager"},
    {BaselineKind::compile, "compile"},
}};

constexpr std::array<std::pair<BaselineCacheMode, const char*>, 3> kModeNames = {{
    {BaselineCacheMode::use, "use"},
    {BaselineCacheMode::refresh, "refresh"},
    {BaselineCacheMode::off, "off"},
}};

template <typename Enum, size_t N>
Enum parse_name(const std::array<std::pair<Enum, const char*>, N>& names, const std::string& name,
                const char* what) {
  std::string known;
  for (const auto& [value, text] : names) {
    if (name == text) return value;
    known += (known.empty() ? "" : ", ") + std::string(text);
  }
  throw Error("unknown " + std::string(what) + " '" + name + "' (expected one of " + known + ")");
}

template <typename Enum, size_t N>
std::string name_of(const std::array<std::pair<Enum, const char*>, N>& names, Enum value) {
  for (const auto& [known, text] : names) {
    if (known == value) return text;
  }
  return "unknown";
}

}  // namespace

std::string to_string(BaselineKind kind) { return name_of(kKindNames, kind); }

BaselineKind parse_baseline_kind(const std::string& name) {
  return parse_name(kKindNames, name, "baseline");
}

std::string to_string(BaselineCacheMode mode) { return name_of(kModeNames, mode); }

BaselineCacheMode parse_baseline_cache_mode(const std::string& name) {
  return parse_name(kModeNames, name, "baseline cache mode");
}

}  // namespace kforge

#include "core/ladder.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

constexpr std::array<std::pair<Rung, const char*>, 4> kRungNames = {{
    {Rung::gate, "gate"},
    {Rung::quick, "quick"},
    {Rung::full, "full"},
    {Rung::final, "final"},
}};

constexpr std::array<std::pair<ComparisonOutcome, const char*>, 4> kComparisonNames = {{
    {ComparisonOutcome::faster, "faster"},
    {ComparisonOutcome::slower, "slower"},
    {ComparisonOutcome::tie, "tie"},
    {ComparisonOutcome::failed, "failed"},
}};

constexpr std::array<std::pair<AcceptanceOutcome, const char*>, 3> kAcceptanceNames = {{
    {AcceptanceOutcome::accepted, "accepted"},
    {AcceptanceOutcome::not_better, "not_better"},
    {AcceptanceOutcome::rejected, "rejected"},
}};

constexpr std::array<std::pair<PromotionOutcome, const char*>, 2> kPromotionNames = {{
    {PromotionOutcome::promoted, "promoted"},
    {PromotionOutcome::pruned, "pruned"},
}};

// One lookup for the four tables: `what` names the type in the error ("rung", "promotion
// outcome"), which lists every known name.
template <typename Enum, size_t N>
std::string name_of(const std::array<std::pair<Enum, const char*>, N>& names, Enum value,
                    const char* what) {
  for (const auto& [known, name] : names) {
    if (known == value) return name;
  }
  throw Error(std::string("invalid ") + what + " " + std::to_string(static_cast<int>(value)));
}

template <typename Enum, size_t N>
Enum value_of(const std::array<std::pair<Enum, const char*>, N>& names, const std::string& name,
              const char* what) {
  std::string known;
  for (const auto& [value, known_name] : names) {
    if (name == known_name) return value;
    known += (known.empty() ? "" : ", ") + std::string(known_name);
  }
  throw Error(std::string("unknown ") + what + " '" + name + "' (expected one of: " + known + ")");
}

}  // namespace

std::string to_string(Rung rung) { return name_of(kRungNames, rung, "rung"); }
Rung parse_rung(const std::string& name) { return value_of(kRungNames, name, "rung"); }

std::string to_string(ComparisonOutcome outcome) {
  return name_of(kComparisonNames, outcome, "comparison outcome");
}
ComparisonOutcome parse_comparison_outcome(const std::string& name) {
  return value_of(kComparisonNames, name, "comparison outcome");
}

std::string to_string(AcceptanceOutcome outcome) {
  return name_of(kAcceptanceNames, outcome, "acceptance outcome");
}
AcceptanceOutcome parse_acceptance_outcome(const std::string& name) {
  return value_of(kAcceptanceNames, name, "acceptance outcome");
}

std::string to_string(PromotionOutcome outcome) {
  return name_of(kPromotionNames, outcome, "promotion outcome");
}
PromotionOutcome parse_promotion_outcome(const std::string& name) {
  return value_of(kPromotionNames, name, "promotion outcome");
}

}  // namespace kforge

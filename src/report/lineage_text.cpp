#include "report/lineage_text.h"

#include <fmt/format.h>

namespace kforge::report {
namespace {

int count(const nlohmann::json& support, const char* key) {
  const auto it = support.find(key);
  return it != support.end() && it->is_number() ? it->get<int>() : 0;
}

// "3 prior transitions" / "1 prior transition"; empty for 0.
std::string counted(int n, const char* what) {
  if (n == 0) return "";
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    text += (text.empty() ? "" : ", ") + part;
  }
  return text;
}

std::string speedup_text(const nlohmann::json& step) {
  const std::string rung = step.value("speedup_rung", "none");
  if (rung == "none") return "not timed";
  return fmt::format("{:.2f}x {}", step.value("speedup", 0.0), rung);
}

}  // namespace

std::string support_text(const nlohmann::json& support) {
  if (!support.is_object()) return "reason not recorded";
  const std::string basis = support.value("basis", "");
  const std::string p = fmt::format("p {:.2f}", support.value("probability", 0.0));
  const std::string against = counted(count(support, "prior_against"), "earlier row");
  if (basis == "memory") {
    const int tasks = count(support, "prior_tasks");
    return fmt::format("memory ({} from {} earlier task{}{}; {})",
                       joined({counted(count(support, "prior_transitions"), "prior transition"),
                               counted(count(support, "prior_direction"), "direction row"),
                               counted(count(support, "prior_strategy"), "strategy row")}),
                       tasks, tasks == 1 ? "" : "s",
                       against.empty() ? "" : ", " + against + " against", p);
  }
  if (basis == "this_run") {
    return fmt::format("this run's evidence ({} supporting{}; {})",
                       counted(count(support, "run_support"), "row"),
                       against.empty() ? "" : ", " + against + " against", p);
  }
  if (basis == "no_memory") return "no memory read (the policy reads no evidence)";
  return fmt::format("explored (no evidence for it{}; {})",
                     against.empty() ? "" : ", " + against + " against", p);
}

std::vector<std::string> lineage_lines(const nlohmann::json& lineage) {
  if (!lineage.is_array() || lineage.empty()) return {};
  std::vector<std::string> lines;
  int moves = 0;
  int from_memory = 0;
  for (const nlohmann::json& step : lineage) {
    const std::string strategy = step.value("strategy", "");
    if (strategy.empty()) {
      lines.push_back(fmt::format("#{} {} (start), {}", step.value("index", 0),
                                  step.value("id", "?"), speedup_text(step)));
      continue;
    }
    ++moves;
    const nlohmann::json support = step.value("support", nlohmann::json());
    from_memory += support.is_object() && support.value("basis", "") == "memory";
    lines.push_back(fmt::format("-> #{} {} / {}, {}: {}", step.value("index", 0),
                                step.value("direction", "?"), strategy, speedup_text(step),
                                support_text(support)));
  }
  if (moves > 0) {
    lines.push_back(fmt::format("{} of {} move{} chosen from earlier runs' evidence", from_memory,
                                moves, moves == 1 ? "" : "s"));
  } else {
    lines.push_back("the best is an expert hint: no move, so no memory, led to it");
  }
  return lines;
}

}  // namespace kforge::report

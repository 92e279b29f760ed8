#include "search/budget.h"

#include <cmath>

#include <fmt/format.h>

#include "common/error.h"

namespace kforge::search {

namespace {

void check_positive(const std::optional<double>& value, const char* flag) {
  if (value && !(std::isfinite(*value) && *value > 0.0)) {
    throw Error(fmt::format("{} must be a positive number (got {}); leave it out for no limit",
                            flag, *value));
  }
}

}  // namespace

void BudgetLimits::validate() const {
  check_positive(max_wall_s, "--max-wall-s");
  check_positive(max_device_s, "--max-device-s");
  check_positive(max_cost_usd, "--max-cost-usd");
  if (max_candidates && *max_candidates <= 0) {
    throw Error(fmt::format("--max-candidates must be a positive whole number (got {}); leave it "
                            "out for no limit",
                            *max_candidates));
  }
}

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::steps: return "steps";
    case StopReason::max_wall_s: return "max_wall_s";
    case StopReason::max_device_s: return "max_device_s";
    case StopReason::max_candidates: return "max_candidates";
    case StopReason::max_cost_usd: return "max_cost_usd";
    case StopReason::interrupted: return "interrupted";
    case StopReason::generator: return "generator";
    case StopReason::exhausted: return "exhausted";
    case StopReason::no_correct: return "no_correct";
  }
  return "none";
}

BudgetTracker::BudgetTracker(int steps, BudgetLimits limits, std::function<double()> now_s,
                             std::function<double()> cost_usd, BudgetSpend prior)
    : steps_(steps),
      limits_(limits),
      now_s_(std::move(now_s)),
      cost_usd_(std::move(cost_usd)),
      prior_(prior),
      started_s_(now_s_()) {}

void BudgetTracker::add_candidate(double device_s) {
  ++spend_.candidates;
  spend_.device_s += device_s;
}

void BudgetTracker::add_device_s(double device_s) { spend_.device_s += device_s; }

BudgetSpend BudgetTracker::spend() const {
  BudgetSpend spend = spend_;
  spend.wall_s = prior_.wall_s + (now_s_() - started_s_);
  spend.cost_usd = prior_.cost_usd + (cost_usd_ ? cost_usd_() : 0.0);
  return spend;
}

StopReason BudgetTracker::exceeded() const {
  const BudgetSpend now = spend();
  if (limits_.max_wall_s && now.wall_s >= *limits_.max_wall_s) return StopReason::max_wall_s;
  if (limits_.max_device_s && now.device_s >= *limits_.max_device_s) {
    return StopReason::max_device_s;
  }
  if (limits_.max_candidates && now.candidates >= *limits_.max_candidates) {
    return StopReason::max_candidates;
  }
  if (limits_.max_cost_usd && now.cost_usd >= *limits_.max_cost_usd) {
    return StopReason::max_cost_usd;
  }
  return StopReason::none;
}

std::string BudgetTracker::describe() const {
  const BudgetSpend now = spend();
  auto of = [](const auto& limit) {
    return limit ? fmt::format(" of {}", *limit) : std::string();
  };
  return fmt::format("steps {}/{}, wall {:.1f} s{}, device {:.1f} s{}, candidates {}{}, cost ${:.4f}{}",
                     now.steps, steps_, now.wall_s, of(limits_.max_wall_s), now.device_s,
                     of(limits_.max_device_s), now.candidates, of(limits_.max_candidates),
                     now.cost_usd, of(limits_.max_cost_usd));
}

nlohmann::json BudgetTracker::to_json() const {
  const BudgetSpend now = spend();
  auto limit = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(); };
  return {{"limits",
           {{"steps", steps_},
            {"max_wall_s", limit(limits_.max_wall_s)},
            {"max_device_s", limit(limits_.max_device_s)},
            {"max_candidates", limit(limits_.max_candidates)},
            {"max_cost_usd", limit(limits_.max_cost_usd)}}},
          {"spent",
           {{"steps", now.steps},
            {"wall_s", now.wall_s},
            {"device_s", now.device_s},
            {"candidates", now.candidates},
            {"cost_usd", now.cost_usd}}}};
}

}  // namespace kforge::search

#include "search/decisions.h"

namespace kforge::search {

void to_json(nlohmann::json& j, const PlanDecision& plan) {
  nlohmann::json moves = nlohmann::json::array();
  for (const PlannedMove& move : plan.moves) {
    nlohmann::json recorded = {{"parent", move.parent_id},
                               {"direction", move.direction_id},
                               {"strategy", move.strategy_id},
                               {"candidate", move.candidate_id},
                               {"explanation", move.explanation}};
    if (move.support) recorded["support"] = *move.support;
    moves.push_back(std::move(recorded));
  }
  j = {{"step", plan.step}, {"moves", moves}, {"rng", plan.rng}};
}

void from_json(const nlohmann::json& j, PlanDecision& out) {
  out.step = j.at("step").get<int>();
  out.moves.clear();
  for (const nlohmann::json& move : j.at("moves")) {
    PlannedMove planned{move.at("parent").get<std::string>(),
                        move.at("direction").get<std::string>(),
                        move.at("strategy").get<std::string>(),
                        move.at("candidate").get<std::string>(), move.value("explanation", ""),
                        std::nullopt};
    if (move.contains("support")) planned.support = move.at("support").get<memory::ChoiceSupport>();
    out.moves.push_back(std::move(planned));
  }
  out.rng = j.at("rng").get<std::string>();
}

void to_json(nlohmann::json& j, const AcceptanceDecision& decision) {
  j = {{"incumbent", decision.incumbent},
       {"challenger", decision.challenger},
       {"outcome", to_string(decision.outcome)},
       {"speedup", decision.speedup},
       {"ci_low", decision.ci_low},
       {"ci_high", decision.ci_high}};
  if (decision.outcome == ComparisonOutcome::failed) {
    j["failed"] = decision.failed;
    j["verdict"] = to_string(decision.verdict);
    j["message"] = decision.message;
  }
}

void from_json(const nlohmann::json& j, AcceptanceDecision& out) {
  out.incumbent = j.value("incumbent", "");
  out.challenger = j.value("challenger", "");
  out.outcome = parse_comparison_outcome(j.at("outcome").get<std::string>());
  out.speedup = j.value("speedup", 0.0);
  out.ci_low = j.value("ci_low", 0.0);
  out.ci_high = j.value("ci_high", 0.0);
  out.failed = j.value("failed", "");
  out.verdict = parse_verdict(j.value("verdict", "ok"));
  out.message = j.value("message", "");
}

void to_json(nlohmann::json& j, const PromotionDecision& decision) {
  j = {{"candidate", decision.candidate},
       {"outcome", to_string(decision.outcome)},
       {"score", decision.score},
       {"rank", decision.rank},
       {"quota", decision.quota},
       {"cohort", decision.cohort},
       {"eta", decision.eta},
       {"fidelity", to_string(decision.fidelity)},
       {"reason", decision.reason}};
}

void from_json(const nlohmann::json& j, PromotionDecision& out) {
  out.candidate = j.value("candidate", "");
  out.outcome = parse_promotion_outcome(j.at("outcome").get<std::string>());
  out.score = j.value("score", 0.0);
  out.rank = j.value("rank", 0);
  out.quota = j.value("quota", 0);
  out.cohort = j.value("cohort", size_t{0});
  out.eta = j.value("eta", 0.0);
  out.fidelity = parse_fidelity(j.value("fidelity", "ladder"));
  out.reason = j.value("reason", "");
}

void to_json(nlohmann::json& j, const FullRungDecision& decision) {
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& [workload, speedup] : decision.workload_speedups) {
    workloads.push_back({{"workload", workload}, {"speedup", speedup}});
  }
  j = {{"candidate", decision.candidate},
       {"verdict", to_string(decision.verdict)},
       {"message", decision.message},
       {"geomean_speedup", decision.geomean_speedup},
       {"workload_speedups", workloads}};
}

void from_json(const nlohmann::json& j, FullRungDecision& out) {
  out.candidate = j.value("candidate", "");
  out.verdict = parse_verdict(j.at("verdict").get<std::string>());
  out.message = j.value("message", "");
  out.geomean_speedup = j.at("geomean_speedup").get<double>();
  out.workload_speedups.clear();
  for (const nlohmann::json& w : j.value("workload_speedups", nlohmann::json::array())) {
    out.workload_speedups.emplace_back(w.at("workload").get<std::string>(),
                                       w.at("speedup").get<double>());
  }
}

void to_json(nlohmann::json& j, const ReferenceTiming& reference) {
  j = {{"quick_median_ms", reference.quick_median_ms},
       {"copy_bytes_per_s", reference.copy_bytes_per_s},
       {"peak_flops_per_s", reference.peak_flops_per_s}};
}

void from_json(const nlohmann::json& j, ReferenceTiming& out) {
  out.quick_median_ms = j.at("quick_median_ms").get<double>();
  out.copy_bytes_per_s = j.at("copy_bytes_per_s").get<double>();
  out.peak_flops_per_s = j.at("peak_flops_per_s").get<double>();
}

}  // namespace kforge::search

#include "memory/recorded_run.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace kforge::memory {
namespace {

nlohmann::json number_or_null(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

nlohmann::json candidate_json(const RecordedCandidate& c) {
  return {{"candidate_id", c.candidate_id},
          {"source_name", c.source_name},
          {"source", c.source},
          {"verdict", c.verdict},
          {"message", c.message},
          {"failed_at", c.failed_at},
          {"median_ms", number_or_null(c.median_ms)},
          {"reference_median_ms", number_or_null(c.reference_median_ms)},
          {"speedup", number_or_null(c.speedup)},
          {"ci_low", number_or_null(c.ci_low)},
          {"ci_high", number_or_null(c.ci_high)},
          {"level", number_or_null(c.level)}};
}

RecordedCandidate candidate_from(const nlohmann::json& j) {
  RecordedCandidate c;
  c.candidate_id = j.at("candidate_id").get<std::string>();
  c.source_name = j.at("source_name").get<std::string>();
  c.source = j.at("source").get<std::string>();
  c.verdict = j.at("verdict").get<std::string>();
  c.message = j.value("message", "");
  c.failed_at = j.value("failed_at", "");
  c.median_ms = optional_number(j, "median_ms");
  c.reference_median_ms = optional_number(j, "reference_median_ms");
  c.speedup = optional_number(j, "speedup");
  c.ci_low = optional_number(j, "ci_low");
  c.ci_high = optional_number(j, "ci_high");
  c.level = optional_number(j, "level");
  return c;
}

}  // namespace

nlohmann::json to_json(const RecordedRun& run) {
  const Provenance& p = run.provenance;
  nlohmann::json j = {{"id", run.id},
                      {"created_at", run.created_at},
                      {"kind", run.kind},
                      {"task", run.task},
                      {"command", run.command},
                      {"provenance", provenance_json(p)}};
  j["candidates"] = nlohmann::json::array();
  for (const RecordedCandidate& c : run.candidates) j["candidates"].push_back(candidate_json(c));
  return j;
}

nlohmann::json provenance_json(const Provenance& p) {
  return {{"backend", p.backend},     {"device", p.device},
          {"compute_capability", p.compute_capability},
          {"toolchain", p.toolchain}, {"family", p.family},
          {"task_hash", p.task_hash}};
}

Provenance provenance_from(const nlohmann::json& p) {
  Provenance provenance;
  provenance.backend = p.at("backend").get<std::string>();
  provenance.device = p.at("device").get<std::string>();
  provenance.compute_capability = p.at("compute_capability").get<std::string>();
  provenance.toolchain = p.at("toolchain").get<std::string>();
  provenance.family = p.at("family").get<std::string>();
  provenance.task_hash = p.at("task_hash").get<std::string>();
  return provenance;
}

RecordedRun recorded_run_from(const nlohmann::json& j, const std::string& where) {
  try {
    RecordedRun run;
    run.created_at = j.at("created_at").get<std::string>();
    run.kind = j.at("kind").get<std::string>();
    run.task = j.at("task").get<std::string>();
    run.command = j.value("command", "");
    run.provenance = provenance_from(j.at("provenance"));
    for (const nlohmann::json& c : j.at("candidates")) run.candidates.push_back(candidate_from(c));
    return run;
  } catch (const nlohmann::json::exception& e) {
    throw Error(where +
                ": a recorded run needs created_at, kind, task, provenance {backend, "
                "device, compute_capability, toolchain, family, task_hash} and candidates "
                "[{candidate_id, source_name, source, verdict, ...}]: " +
                e.what());
  }
}

}  // namespace kforge::memory

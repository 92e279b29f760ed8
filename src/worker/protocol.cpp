#include "worker/protocol.h"

#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"

namespace kforge::worker {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<Command, const char*>, 5> kCommandNames = {{
    {Command::hello, "hello"},
    {Command::load, "load"},
    {Command::check, "check"},
    {Command::time, "time"},
    {Command::shutdown, "shutdown"},
}};

/// A double as JSON: a number when finite, else "inf" / "-inf" / "nan" (JSON has no such numbers).
json number_to_json(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

double number_from_json(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  const std::string text = j.get<std::string>();
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw Error("expected a number, got \"" + text + "\"");
}

/// `j[key]` as a double if present, else `fallback`.
double number_or(const json& j, const char* key, double fallback) {
  auto found = j.find(key);
  return found == j.end() ? fallback : number_from_json(*found);
}

Verdict verdict_of(const json& j) { return parse_verdict(j.at("verdict").get<std::string>()); }

}  // namespace

std::string to_string(Command command) {
  for (const auto& [value, name] : kCommandNames) {
    if (value == command) return name;
  }
  return "unknown";
}

Command parse_command(const std::string& name) {
  for (const auto& [value, known] : kCommandNames) {
    if (name == known) return value;
  }
  throw Error("unknown worker command '" + name +
              "' (expected one of hello, load, check, time, shutdown)");
}

void to_json(json& j, const DeviceInfo& v) {
  j = {{"protocol_version", v.protocol_version},
       {"backend", v.backend},
       {"device_index", v.device_index},
       {"name", v.name},
       {"compute_capability", v.compute_capability},
       {"multiprocessor_count", v.multiprocessor_count},
       {"l2_bytes", v.l2_bytes},
       {"memory_bytes", v.memory_bytes},
       {"driver_version", v.driver_version},
       {"runtime_version", v.runtime_version}};
}

void from_json(const json& j, DeviceInfo& v) {
  v.protocol_version = j.at("protocol_version").get<int>();
  v.backend = j.at("backend").get<std::string>();
  v.device_index = j.value("device_index", 0);
  v.name = j.value("name", "");
  v.compute_capability = j.value("compute_capability", "");
  v.multiprocessor_count = j.value("multiprocessor_count", 0);
  v.l2_bytes = j.value("l2_bytes", int64_t{0});
  v.memory_bytes = j.value("memory_bytes", int64_t{0});
  v.driver_version = j.value("driver_version", "");
  v.runtime_version = j.value("runtime_version", "");
}

void to_json(json& j, const LoadRequest& v) { j = {{"path", v.path}}; }

void from_json(const json& j, LoadRequest& v) { v.path = j.at("path").get<std::string>(); }

void to_json(json& j, const LoadResult& v) {
  j = {{"verdict", to_string(v.verdict)}, {"message", v.message}, {"handle", v.handle}};
}

void from_json(const json& j, LoadResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.handle = j.value("handle", -1);
}

void to_json(json& j, const CheckRequest& v) {
  j = {{"candidate_handle", v.candidate_handle},
       {"reference_handle", v.reference_handle},
       {"signature", v.signature},
       {"workloads", v.workloads},
       {"seeds", v.seeds},
       {"tolerance", v.tolerance}};
}

void from_json(const json& j, CheckRequest& v) {
  v.candidate_handle = j.at("candidate_handle").get<int>();
  v.reference_handle = j.at("reference_handle").get<int>();
  v.signature = j.at("signature").get<Signature>();
  v.workloads = j.at("workloads").get<std::vector<Workload>>();
  v.seeds = j.at("seeds").get<std::vector<uint64_t>>();
  v.tolerance = j.at("tolerance").get<Tolerance>();
}

void to_json(json& j, const CheckResult& v) {
  j = {{"verdict", to_string(v.verdict)},
       {"message", v.message},
       {"max_abs_error", number_to_json(v.max_abs_error)},
       {"max_rel_error", number_to_json(v.max_rel_error)},
       {"cases_checked", v.cases_checked}};
}

void from_json(const json& j, CheckResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.max_abs_error = number_or(j, "max_abs_error", 0.0);
  v.max_rel_error = number_or(j, "max_rel_error", 0.0);
  v.cases_checked = j.value("cases_checked", 0);
}

void to_json(json& j, const TimeRequest& v) {
  j = {{"handle", v.handle},     {"signature", v.signature},
       {"workload", v.workload}, {"seed", v.seed},
       {"warmup", v.warmup},     {"repetitions", v.repetitions},
       {"flush_l2", v.flush_l2}, {"max_seconds", number_to_json(v.max_seconds)}};
}

void from_json(const json& j, TimeRequest& v) {
  const TimeRequest defaults;
  v.handle = j.at("handle").get<int>();
  v.signature = j.at("signature").get<Signature>();
  v.workload = j.at("workload").get<Workload>();
  v.seed = j.value("seed", defaults.seed);
  v.warmup = j.value("warmup", defaults.warmup);
  v.repetitions = j.value("repetitions", defaults.repetitions);
  v.flush_l2 = j.value("flush_l2", defaults.flush_l2);
  v.max_seconds = number_or(j, "max_seconds", defaults.max_seconds);
}

void to_json(json& j, const TimeResult& v) {
  json samples = json::array();
  for (double sample : v.samples_ms) samples.push_back(number_to_json(sample));
  j = {{"verdict", to_string(v.verdict)},
       {"message", v.message},
       {"samples_ms", std::move(samples)},
       {"host_wall_ms", number_to_json(v.host_wall_ms)}};
}

void from_json(const json& j, TimeResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.samples_ms.clear();
  if (auto found = j.find("samples_ms"); found != j.end()) {
    for (const json& sample : *found) v.samples_ms.push_back(number_from_json(sample));
  }
  v.host_wall_ms = number_or(j, "host_wall_ms", 0.0);
}

}  // namespace kforge::worker

#include "worker/protocol.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "common/error.h"

namespace kforge::worker {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<Command, const char*>, 7> kCommandNames = {{
    {Command::hello, "hello"},
    {Command::load, "load"},
    {Command::run, "run"},
    {Command::time, "time"},
    {Command::provide, "provide"},
    {Command::unload, "unload"},
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

// Digests travel as 16 hex digits: JSON numbers above 2^53 do not survive every parser (the
// Python worker's json module does, nlohmann's does, a future tool's may not).
std::string digest_to_json(uint64_t digest) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digest));
  return text;
}

uint64_t digest_from_json(const json& j, const char* key) {
  const std::string text = j.at(key).get<std::string>();
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error(std::string("'") + key + "' must be 16 lowercase hex digits, got '" + text + "'");
  }
  return std::stoull(text, nullptr, 16);
}

json digests_to_json(const std::vector<uint64_t>& digests) {
  json array = json::array();
  for (uint64_t digest : digests) array.push_back(digest_to_json(digest));
  return array;
}

std::vector<uint64_t> digests_from_json(const json& j, const char* key) {
  std::vector<uint64_t> digests;
  if (auto found = j.find(key); found != j.end()) {
    for (size_t i = 0; i < found->size(); ++i) {
      digests.push_back(digest_from_json(json{{"d", found->at(i)}}, "d"));
    }
  }
  return digests;
}

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
              "' (expected one of hello, load, run, time, provide, unload, shutdown)");
}

namespace {

/// A vector of doubles as JSON, non-finite values as strings.
json numbers_to_json(const std::vector<double>& values) {
  json array = json::array();
  for (double value : values) array.push_back(number_to_json(value));
  return array;
}

std::vector<double> numbers_from_json(const json& j, const char* key) {
  std::vector<double> values;
  if (auto found = j.find(key); found != j.end()) {
    for (const json& value : *found) values.push_back(number_from_json(value));
  }
  return values;
}

}  // namespace

void to_json(json& j, const HelloRequest& v) { j = {{"token", v.token}, {"measure", v.measure}}; }

void from_json(const json& j, HelloRequest& v) {
  v.token = j.value("token", "");
  v.measure = j.value("measure", false);
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
       {"runtime_version", v.runtime_version},
       {"copy_bytes_per_s", number_to_json(v.copy_bytes_per_s)},
       {"peak_flops_per_s", v.peak_flops_per_s},
       {"measured_flops_per_s", v.measured_flops_per_s},
       {"sm_clock_mhz", v.sm_clock_mhz}};
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
  v.copy_bytes_per_s = number_or(j, "copy_bytes_per_s", 0.0);
  v.peak_flops_per_s = j.value("peak_flops_per_s", std::map<std::string, double>{});
  v.measured_flops_per_s = j.value("measured_flops_per_s", std::map<std::string, double>{});
  v.sm_clock_mhz = j.value("sm_clock_mhz", 0);
}

void to_json(json& j, const LoadRequest& v) {
  j = {{"path", v.path}};
  if (!v.task_path.empty()) j["task_path"] = v.task_path;
}

void from_json(const json& j, LoadRequest& v) {
  v.path = j.at("path").get<std::string>();
  v.task_path = j.value("task_path", "");
}

void to_json(json& j, const LoadResult& v) {
  j = {{"verdict", to_string(v.verdict)}, {"message", v.message}, {"handle", v.handle}};
}

void from_json(const json& j, LoadResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.handle = j.value("handle", -1);
}

void to_json(json& j, const RunRequest& v) {
  j = {{"handle", v.handle},
       {"signature", v.signature},
       {"workload", v.workload},
       {"seed", v.seed},
       {"distribution", v.distribution},
       {"calls", v.calls},
       {"padded", v.padded},
       {"output_path", v.output_path},
       {"late_write_wait_ms", number_to_json(v.late_write_wait_ms)},
       {"host_inputs", v.host_inputs},
       {"remap", v.remap},
       {"digest", v.digest}};
  if (!v.provided_dir.empty()) j["provided_dir"] = v.provided_dir;
  if (!v.nvtx_range.empty()) j["nvtx_range"] = v.nvtx_range;
}

void from_json(const json& j, RunRequest& v) {
  const RunRequest defaults;
  v.handle = j.at("handle").get<int>();
  v.signature = j.at("signature").get<Signature>();
  v.workload = j.at("workload").get<Workload>();
  v.seed = j.value("seed", defaults.seed);
  v.distribution = j.value("distribution", defaults.distribution);
  v.calls = j.value("calls", defaults.calls);
  v.padded = j.value("padded", false);
  v.output_path = j.at("output_path").get<std::string>();
  v.late_write_wait_ms = number_or(j, "late_write_wait_ms", defaults.late_write_wait_ms);
  v.host_inputs = j.value("host_inputs", false);
  v.remap = j.value("remap", defaults.remap);
  v.digest = j.value("digest", defaults.digest);
  v.provided_dir = j.value("provided_dir", defaults.provided_dir);
  v.nvtx_range = j.value("nvtx_range", defaults.nvtx_range);
}

void to_json(json& j, const RunResult& v) {
  j = {{"verdict", to_string(v.verdict)},
       {"message", v.message},
       {"calls_completed", v.calls_completed},
       {"output_bytes", v.output_bytes},
       {"input_modified", v.input_modified},
       {"late_write", v.late_write},
       {"guard_violation", v.guard_violation},
       {"foreign_work", v.foreign_work},
       {"work_audited", v.work_audited},
       {"digests", digests_to_json(v.digests)},
       {"call_ms", numbers_to_json(v.call_ms)},
       {"input_ms", number_to_json(v.input_ms)},
       {"output_ms", number_to_json(v.output_ms)},
       {"check_ms", number_to_json(v.check_ms)}};
}

void from_json(const json& j, RunResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.calls_completed = j.value("calls_completed", 0);
  v.output_bytes = j.value("output_bytes", int64_t{0});
  v.input_modified = j.value("input_modified", "");
  v.late_write = j.value("late_write", "");
  v.guard_violation = j.value("guard_violation", "");
  v.foreign_work = j.value("foreign_work", "");
  v.work_audited = j.value("work_audited", false);
  v.digests = digests_from_json(j, "digests");
  v.call_ms = numbers_from_json(j, "call_ms");
  v.input_ms = number_or(j, "input_ms", 0.0);
  v.output_ms = number_or(j, "output_ms", 0.0);
  v.check_ms = number_or(j, "check_ms", 0.0);
  v.guard_violation = j.value("guard_violation", "");
  v.foreign_work = j.value("foreign_work", "");
  v.work_audited = j.value("work_audited", false);
}

void to_json(json& j, const MeasurementPolicy& v) {
  j = {{"warmup", v.warmup},
       {"min_repetitions", v.min_repetitions},
       {"max_repetitions", v.max_repetitions},
       {"target_relative_noise", number_to_json(v.target_relative_noise)},
       {"max_seconds", number_to_json(v.max_seconds)}};
}

void from_json(const json& j, MeasurementPolicy& v) {
  const MeasurementPolicy defaults;
  v.warmup = j.value("warmup", defaults.warmup);
  v.min_repetitions = j.value("min_repetitions", defaults.min_repetitions);
  v.max_repetitions = j.value("max_repetitions", defaults.max_repetitions);
  v.target_relative_noise =
      number_or(j, "target_relative_noise", defaults.target_relative_noise);
  v.max_seconds = number_or(j, "max_seconds", defaults.max_seconds);
}


void to_json(json& j, const TimedCheck& v) {
  j = {{"call", v.call}, {"overwrite", v.overwrite}, {"seed", v.seed},
       {"distribution", v.distribution}};
}

void from_json(const json& j, TimedCheck& v) {
  const TimedCheck defaults;
  v.call = j.at("call").get<int>();
  v.overwrite = j.value("overwrite", defaults.overwrite);
  v.seed = j.value("seed", defaults.seed);
  v.distribution = j.value("distribution", defaults.distribution);
}

void to_json(json& j, const VerifiedDigest& v) {
  j = {{"seed", v.seed}, {"distribution", v.distribution}, {"digest", digest_to_json(v.digest)}};
}

void from_json(const json& j, VerifiedDigest& v) {
  v.seed = j.at("seed").get<uint64_t>();
  v.distribution = j.at("distribution").get<std::string>();
  v.digest = digest_from_json(j, "digest");
}

void to_json(json& j, const CheckedCall& v) {
  j = {{"call", v.call},     {"seed", v.seed},     {"distribution", v.distribution},
       {"digest", digest_to_json(v.digest)}, {"offset", v.offset}, {"same_as", v.same_as}};
}

void from_json(const json& j, CheckedCall& v) {
  v.call = j.at("call").get<int>();
  v.seed = j.at("seed").get<uint64_t>();
  v.distribution = j.at("distribution").get<std::string>();
  v.digest = digest_from_json(j, "digest");
  v.offset = j.value("offset", int64_t{-1});
  v.same_as = j.value("same_as", -1);
}

void to_json(json& j, const TimeRequest& v) {
  j = {{"handle", v.handle},
       {"signature", v.signature},
       {"workload", v.workload},
       {"seed", v.seed},
       {"distribution", v.distribution},
       {"input_sets", v.input_sets},
       {"policy", v.policy},
       {"flush_l2", v.flush_l2},
       {"checks", v.checks},
       {"verified", v.verified},
       {"check_path", v.check_path},
       {"baseline", v.baseline}};
  if (!v.provided_dir.empty()) j["provided_dir"] = v.provided_dir;
}

void from_json(const json& j, TimeRequest& v) {
  const TimeRequest defaults;
  v.handle = j.at("handle").get<int>();
  v.signature = j.at("signature").get<Signature>();
  v.workload = j.at("workload").get<Workload>();
  v.seed = j.value("seed", defaults.seed);
  v.distribution = j.value("distribution", defaults.distribution);
  v.input_sets = j.value("input_sets", defaults.input_sets);
  v.policy = j.value("policy", defaults.policy);
  v.flush_l2 = j.value("flush_l2", defaults.flush_l2);
  v.checks = j.value("checks", std::vector<TimedCheck>{});
  v.verified = j.value("verified", std::vector<VerifiedDigest>{});
  v.check_path = j.value("check_path", defaults.check_path);
  v.baseline = j.value("baseline", defaults.baseline);
  v.provided_dir = j.value("provided_dir", defaults.provided_dir);
}

void to_json(json& j, const ProvideRequest& v) {
  j = {{"handle", v.handle},
       {"signature", v.signature},
       {"workload", v.workload},
       {"seeds", v.seeds},
       {"dir", v.dir}};
}

void from_json(const json& j, ProvideRequest& v) {
  v.handle = j.at("handle").get<int>();
  v.signature = j.at("signature").get<Signature>();
  v.workload = j.at("workload").get<Workload>();
  v.seeds = j.at("seeds").get<std::vector<uint64_t>>();
  v.dir = j.at("dir").get<std::string>();
}

void to_json(json& j, const ProvideResult& v) {
  j = {{"verdict", to_string(v.verdict)},
       {"message", v.message},
       {"bytes_written", v.bytes_written},
       {"seconds", v.seconds}};
}

void from_json(const json& j, ProvideResult& v) {
  v.verdict = parse_verdict(j.at("verdict").get<std::string>());
  v.message = j.value("message", std::string());
  v.bytes_written = j.value("bytes_written", int64_t{0});
  v.seconds = j.value("seconds", 0.0);
}

void to_json(json& j, const TimeResult& v) {
  j = {{"verdict", to_string(v.verdict)},
       {"message", v.message},
       {"samples_ms", numbers_to_json(v.samples_ms)},
       {"host_ms", numbers_to_json(v.host_ms)},
       {"sm_clock_mhz", v.sm_clock_mhz},
       {"throttled", v.throttled},
       {"overhead_ms", number_to_json(v.overhead_ms)},
       {"input_sets_used", v.input_sets_used},
       {"inputs_reused", v.inputs_reused},
       {"setup_ms", number_to_json(v.setup_ms)},
       {"checked", v.checked},
       {"stop_reason", v.stop_reason},
       {"host_wall_ms", number_to_json(v.host_wall_ms)},
       {"warmup_ms", numbers_to_json(v.warmup_ms)},
       {"check_ms", number_to_json(v.check_ms)},
       {"guard_violation", v.guard_violation},
       {"foreign_work", v.foreign_work},
       {"work_audited", v.work_audited},
       {"compile_ms", number_to_json(v.compile_ms)},
       {"compile_reused", v.compile_reused},
       {"compile_unsupported", v.compile_unsupported}};
}

void from_json(const json& j, TimeResult& v) {
  v.verdict = verdict_of(j);
  v.message = j.value("message", "");
  v.samples_ms = numbers_from_json(j, "samples_ms");
  v.host_ms = numbers_from_json(j, "host_ms");
  v.sm_clock_mhz = j.value("sm_clock_mhz", std::vector<int>{});
  v.throttled = j.value("throttled", std::vector<bool>{});
  v.overhead_ms = number_or(j, "overhead_ms", 0.0);
  v.input_sets_used = j.value("input_sets_used", 0);
  v.inputs_reused = j.value("inputs_reused", false);
  v.setup_ms = number_or(j, "setup_ms", 0.0);
  v.checked = j.value("checked", std::vector<CheckedCall>{});
  v.stop_reason = j.value("stop_reason", "");
  v.host_wall_ms = number_or(j, "host_wall_ms", 0.0);
  v.warmup_ms = j.contains("warmup_ms") ? numbers_from_json(j, "warmup_ms") : std::vector<double>{};
  v.check_ms = number_or(j, "check_ms", 0.0);
  v.guard_violation = j.value("guard_violation", "");
  v.foreign_work = j.value("foreign_work", "");
  v.work_audited = j.value("work_audited", false);
  v.compile_ms = number_or(j, "compile_ms", 0.0);
  v.compile_reused = j.value("compile_reused", false);
  v.compile_unsupported = j.value("compile_unsupported", false);
}

}  // namespace kforge::worker

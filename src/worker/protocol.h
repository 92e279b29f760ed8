// The worker protocol, version 1: one JSON object per line over the worker's stdin/stdout.
//
// The orchestrator writes a request {"cmd": <command>, "id": n, ...}; the worker answers with
// exactly one line {"id": n, "ok": true, ...} or {"id": n, "ok": false, "error": "..."} (a
// harness error such as a malformed request; candidate failures are verdicts, not errors).
// The first exchange is always `hello`; a client refuses a worker whose protocol_version differs.
// Commands: hello, load, check, time, shutdown.
//
// Extension (compatible, still version 1): a reply may carry "exiting": true, meaning the worker
// exits right after this reply (its device hit a sticky error, e.g. an illegal address); it then
// exits with kWorkerExitDeviceLost and the client respawns it before the next request.
// Doubles that are not finite (an infinite error, a NaN) travel as the strings "inf", "-inf" and
// "nan", since JSON has no such numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/verdict.h"
#include "task/task.h"

namespace kforge::worker {

inline constexpr int kProtocolVersion = 1;

/// Exit codes of kforge-worker: 0 after shutdown or EOF on its input.
inline constexpr int kWorkerExitHarnessError = 1;  // could not start (no device, bad fds)
inline constexpr int kWorkerExitUsage = 2;         // bad command line
inline constexpr int kWorkerExitDeviceLost = 3;    // sticky device error: respawn before reuse

enum class Command { hello, load, check, time, shutdown };
std::string to_string(Command command);
Command parse_command(const std::string& name);  // throws Error on unknown names

/// What a worker reports about itself in `hello`.
struct DeviceInfo {
  int protocol_version = kProtocolVersion;
  std::string backend;             // "cpu" | "cuda"
  int device_index = 0;
  std::string name;                // "NVIDIA H200", or the CPU model name
  std::string compute_capability;  // "9.0"; empty on cpu
  int multiprocessor_count = 0;    // SMs on cuda, hardware threads on cpu
  int64_t l2_bytes = 0;            // L2 size (cuda) or last-level cache size (cpu), bytes
  int64_t memory_bytes = 0;        // device memory (cuda) or physical RAM (cpu), bytes
  std::string driver_version;      // e.g. "13.0"; empty on cpu
  std::string runtime_version;     // CUDA runtime the worker was built with; empty on cpu
};

/// Load a shared object and check its ABI. `handle` identifies it in later requests.
struct LoadRequest {
  std::string path;
};
struct LoadResult {
  Verdict verdict = Verdict::ok;   // ok or wrong_signature (missing kforge_run, ABI mismatch,
                                   // dlopen failure)
  std::string message;
  int handle = -1;
};

/// Correctness gate: for each workload x seed, make inputs from the seed, run the reference on
/// its own copies, poison the candidate's outputs (NaN), run the candidate, verify its inputs are
/// unchanged and compare outputs element-wise against the tolerance.
struct CheckRequest {
  int candidate_handle = -1;
  int reference_handle = -1;
  Signature signature;
  std::vector<Workload> workloads;
  std::vector<uint64_t> seeds;
  Tolerance tolerance;
};
struct CheckResult {
  Verdict verdict = Verdict::ok;   // ok, wrong_answer or runtime_error
  std::string message;             // first failure: workload, seed, tensor, index, got, expected
  double max_abs_error = 0.0;      // over all outputs/workloads/seeds checked
  double max_rel_error = 0.0;
  int cases_checked = 0;           // workloads x seeds that ran
};

/// Timing: `warmup` untimed calls, then `repetitions` timed calls, each on the same inputs.
/// On cuda each sample is CUDA events around one call on the worker's stream, with the L2
/// flushed (a write of 2x the L2 size) before each call outside the timed region when
/// `flush_l2`; on cpu a steady clock around one call. Stops early after `max_seconds`.
struct TimeRequest {
  int handle = -1;
  Signature signature;
  Workload workload;
  uint64_t seed = 0;
  int warmup = 3;
  int repetitions = 20;
  bool flush_l2 = true;
  double max_seconds = 30.0;
};
struct TimeResult {
  Verdict verdict = Verdict::ok;   // ok or runtime_error
  std::string message;
  std::vector<double> samples_ms;  // one per timed call, milliseconds
  double host_wall_ms = 0.0;       // host wall clock over all timed calls incl. flushes, ms
};

void to_json(nlohmann::json& j, const DeviceInfo& v);
void from_json(const nlohmann::json& j, DeviceInfo& v);
void to_json(nlohmann::json& j, const LoadRequest& v);
void from_json(const nlohmann::json& j, LoadRequest& v);
void to_json(nlohmann::json& j, const LoadResult& v);
void from_json(const nlohmann::json& j, LoadResult& v);
void to_json(nlohmann::json& j, const CheckRequest& v);
void from_json(const nlohmann::json& j, CheckRequest& v);
void to_json(nlohmann::json& j, const CheckResult& v);
void from_json(const nlohmann::json& j, CheckResult& v);
void to_json(nlohmann::json& j, const TimeRequest& v);
void from_json(const nlohmann::json& j, TimeRequest& v);
void to_json(nlohmann::json& j, const TimeResult& v);
void from_json(const nlohmann::json& j, TimeResult& v);

}  // namespace kforge::worker

// The worker protocol, version 2: one JSON object per line over the worker's private channels.
//
// The orchestrator writes a request {"cmd": <command>, "id": n, ...}; the worker answers with
// exactly one line {"id": n, "token": t, "ok": true, ...} or {"id": n, "token": t, "ok": false,
// "error": "..."} (a harness error such as a malformed request; candidate failures are verdicts,
// not errors). The first exchange is always `hello`, which hands the worker a random session
// token; every later reply must carry it, so a line a candidate forges on the result channel is
// recognised as forged. A client refuses a worker whose protocol_version differs.
// Commands: hello, load, run, time, provide, unload, shutdown (provide: reference workers of
// PyTorch tasks only; unload {"handle": h} forgets a loaded kernel or task and frees what the
// worker keeps for it, so that one worker can serve task after task: `kforge task --check-batch`).
//
// The worker never judges correctness (version 1 did): `run` writes a kernel's outputs to a file
// and kforge's orchestrator compares them with expected outputs computed by a different worker
// process that never loads a candidate. So the expected answer is never in a candidate's address
// space, and the verdict is made by code no candidate runs next to.
//
// A reply may carry "exiting": true, meaning the worker exits right after this reply (its device
// hit a sticky error, e.g. an illegal address); it then exits with kWorkerExitDeviceLost and the
// client respawns it before the next request.
// Doubles that are not finite travel as the strings "inf", "-inf" and "nan".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/verdict.h"
#include "core/task.h"

namespace kforge::worker {

inline constexpr int kProtocolVersion = 2;

/// Exit codes of kforge-worker: 0 after shutdown or EOF on its input.
inline constexpr int kWorkerExitHarnessError = 1;  // could not start (no device, bad fds)
inline constexpr int kWorkerExitUsage = 2;         // bad command line
inline constexpr int kWorkerExitDeviceLost = 3;    // sticky device error: respawn before reuse

enum class Command { hello, load, run, time, provide, unload, shutdown };
std::string to_string(Command command);
Command parse_command(const std::string& name);  // throws Error on unknown names

/// What `hello` sends: the session token every later reply must echo (32 hex digits, random),
/// and whether to measure the device's copy bandwidth (a few hundred ms; the first hello that
/// asks measures, later ones reuse the number).
struct HelloRequest {
  std::string token;
  bool measure = false;
};

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
  /// Device-to-device copy bandwidth measured once at start: bytes read + bytes written per
  /// second of a large copy (cudaMemcpyAsync, or memcpy on cpu). 0 if not measured.
  double copy_bytes_per_s = 0.0;
  /// Peak arithmetic rate in FLOP/s of the fastest unit per dtype name ("f32", "f16", ...),
  /// derived from the device's attributes (SMs x clock x FLOP per clock per SM of its
  /// architecture); empty when unknown (cpu). Only an upper bound, for the plausibility floor.
  std::map<std::string, double> peak_flops_per_s;
  /// Arithmetic rate in FLOP/s measured once at start with the copy bandwidth: dependent-FMA
  /// chains on every SM ("f32": FFMA, "f64": DFMA; cuda_probe.h). CUDA cores only, so below
  /// peak_flops_per_s where tensor cores count: a roofline for kernels that do not use them.
  /// Empty if not measured (cpu, or hello without measure).
  std::map<std::string, double> measured_flops_per_s;
  int sm_clock_mhz = 0;            // maximum SM clock; 0 on cpu
};

/// Load a shared object and check its ABI. `handle` identifies it in later requests.
struct LoadRequest {
  std::string path;
  /// A Python candidate (a ModelNew source, docs/torch_tasks.md "Python candidates"): the
  /// derived task JSON it is evaluated for. Only the candidate worker (`python3 -m kforge_torch
  /// candidate-worker`) takes one, and needs it; "" for a native kernel (not sent). Defaulted,
  /// so that LoadRequest{path} still says everything for a native kernel.
  std::string task_path = "";
};
struct LoadResult {
  Verdict verdict = Verdict::ok;   // ok or wrong_signature (missing kforge_run, ABI mismatch,
                                   // dlopen failure); for a Python candidate also
                                   // compile_error (syntax, an import that fails),
                                   // runtime_error and rejected_by_policy
  std::string message;
  int handle = -1;
};

/// Produce a kernel's outputs for one workload and seed: inputs are made from (seed,
/// distribution) by make_input (host_data.h), outputs are poisoned with NaN (0xFF bytes) before
/// each of `calls` calls, and after each call (and a device-wide synchronize) the outputs are
/// appended to `output_path` as raw bytes: call 0's outputs in signature order, then call 1's.
/// After the last call the worker checks that the inputs are bitwise unchanged, that the
/// outputs did not change once the call had returned and the device was idle (work left running
/// in a thread), and that no call wrote into the guard bands around any tensor (guard_bands.h). The file must exist (the orchestrator creates it, private to the user).
struct RunRequest {
  int handle = -1;
  Signature signature;
  Workload workload;
  uint64_t seed = 0;
  std::string distribution = "uniform";  // InputDistribution name
  int calls = 1;                         // 1 or 2: two calls must agree (a race moves results)
  /// Strided inputs (TensorSpec::strided) are passed non-contiguous: rows padded by 7 elements
  /// filled with NaN (0xFF bytes), or every other element for a 1-D tensor.
  bool padded = false;
  std::string output_path;
  /// Wait this long after the last call before re-reading the outputs for the late-write check.
  double late_write_wait_ms = 2.0;
  /// Generate inputs on the host and upload them even where the backend could generate them in
  /// place, so that the only kernels launched are the candidate's (profiling: profiler.h).
  bool host_inputs = false;
  /// InputRemap name (host_data.h): "none", or a self-test probe ("every_16th", "half_rows")
  /// whose inputs repeat some of their own elements. Only the reference ever gets one.
  std::string remap = "none";
  /// Hash each call's outputs (output_digest, kernel_runner.h) into RunResult::digests, so that
  /// outputs the orchestrator verified here need not be read back when a timed call repeats them.
  bool digest = false;
  /// Where the provided inputs (TensorSpec::provided) of this workload and seed are
  /// (provided_inputs.h); "" when the signature has none.
  std::string provided_dir;
  /// Profiling a Python candidate (evaluation/profiler.h): the candidate worker opens an NVTX
  /// push/pop range of this name around the last call's forward only, so that ncu counts the
  /// kernels forward launches and none of the harness's (input copies, checks). "" = none, and
  /// not sent; kforge-worker ignores it (with host_inputs a native call launches only the
  /// candidate's kernels).
  std::string nvtx_range;
};
struct RunResult {
  Verdict verdict = Verdict::ok;   // ok or runtime_error (non-zero return, exception, device
                                   // error); a wrong answer is for the orchestrator to find.
                                   // The Python candidate worker also answers wrong_answer (an
                                   // output aliasing an input, a parameter or an earlier
                                   // output), wrong_signature (forward returned the wrong kind
                                   // or size) and rejected_by_policy (the harness was changed)
  std::string message;
  int calls_completed = 0;
  int64_t output_bytes = 0;        // bytes per call in output_path (all outputs of one call)
  std::string input_modified;      // "" or where an input was written ("'x' at [3, 7]")
  std::string late_write;          // "" or where an output changed after the call returned
  std::string guard_violation;     // "" or what was written outside a tensor's storage, over
                                   // every call ("wrote 4 bytes past output 'y'")
  /// "" or the work a call put outside args->stream (DeviceBackend::end_work_audit), prefixed
  /// "call 2: " when the second of two calls did; the first finding only.
  std::string foreign_work;
  bool work_audited = false;       // every call ran inside a work audit (false on cpu, or
                                   // where CUPTI is unavailable: foreign_work is then unknown)
  /// With RunRequest::digest: the output_digest of each call whose outputs did not change while
  /// they were read back (so possibly fewer than the calls).
  std::vector<uint64_t> digests;
  std::vector<double> call_ms;     // host wall time of each call incl. device synchronize
  double input_ms = 0.0;           // making and uploading inputs
  double output_ms = 0.0;          // downloading and writing outputs
  double check_ms = 0.0;           // the late-write, unchanged-input and guard-band checks
};

/// Measurement policy of one timing request (nvbench-style): `warmup` untimed calls (at least
/// one per input set), then at
/// least `min_repetitions` and at most `max_repetitions` timed calls; after the minimum, stop
/// once the 95% confidence interval of the median (order-statistic ranks) is within
/// +-`target_relative_noise` of the median, or once `max_seconds` have passed.
struct MeasurementPolicy {
  int warmup = 3;
  int min_repetitions = 10;
  int max_repetitions = 100;
  double target_relative_noise = 0.005;
  double max_seconds = 10.0;
};

/// One timed call whose outputs are checked (TimeRequest::checks). Outputs are poisoned before
/// every warm-up and timed call, so a call that writes nothing leaves NaN for the check to find.
struct TimedCheck {
  int call = 0;            // timed call index; must be below min_repetitions, so that it runs
  /// Before the call, overwrite the inputs of the set that call uses with those of (seed,
  /// distribution), and restore the set's own inputs after it (outside the timed region).
  /// Otherwise the call runs on the set's own inputs. The worker reports which it were.
  bool overwrite = false;
  uint64_t seed = 0;
  std::string distribution = "uniform";
};
/// Outputs already verified correct for inputs (seed, distribution): a checked call whose
/// outputs hash to `digest` is reported without writing its bytes (TimeResult::checked).
struct VerifiedDigest {
  uint64_t seed = 0;
  std::string distribution = "uniform";
  uint64_t digest = 0;
};
/// What the worker saw at one checked call.
struct CheckedCall {
  int call = 0;
  uint64_t seed = 0;                      // the inputs the call ran on
  std::string distribution = "uniform";
  uint64_t digest = 0;                    // hash of all outputs of the call (output_digest)
  /// 0 when the call's outputs (all outputs, signature order) were written to its file
  /// (check_file(check_path, k) for the k-th check), -1 when their digest was a verified one or
  /// equal to an earlier checked call's of this request on the same inputs (then `same_as`
  /// names that call) and nothing was written.
  int64_t offset = -1;
  int same_as = -1;
};

/// Timing on one workload. Inputs come in `input_sets` rotated sets (seeds seed, seed+1, ...,
/// distinct addresses and values); timed call i uses set i % input_sets. Each timed call is
/// preceded, outside the timed region, by a poison of the outputs (NaN), an L2 flush (a write of
/// 2x the L2 size) when `flush_l2` and a reset of persisting-L2 lines (cuda). Each sample is
/// device events on the worker's stream around one call; the host wall clock around the call
/// plus a device-wide synchronize is taken too, so work hidden on another stream shows as a gap.
/// Checks: at each call of `checks` the outputs are hashed and, unless the digest is verified
/// or repeated, written to the k-th check's file "<check_path>.<k>" (raw bytes, signature order;
/// the orchestrator creates every one) for the orchestrator to compare with the reference's. The orchestrator picks the calls from a secret of its own, so a
/// kernel that computes only when it expects to be checked, replays cached results or leaves
/// work unfinished when it returns fails at a call it cannot predict.
struct TimeRequest {
  int handle = -1;
  Signature signature;
  Workload workload;
  uint64_t seed = 0;
  std::string distribution = "uniform";
  int input_sets = 2;
  MeasurementPolicy policy;
  bool flush_l2 = true;
  std::vector<TimedCheck> checks;
  std::vector<VerifiedDigest> verified;
  std::string check_path;  // base name of the check files; "<check_path>.<k>" must exist
  /// What runs (BaselineKind's string, core/baseline.h): "eager", the loaded kernel or module as
  /// given; "compile", torch.compile of the loaded PyTorch module, compiled at the first such
  /// request for that module and workload (TimeResult::compile_ms). Only the torch reference
  /// worker serves "compile"; kforge-worker refuses it (ok: false).
  std::string baseline = "eager";
  /// Where the provided inputs of every seed this request uses are (the sets' seed + s and the
  /// checks' seeds; provided_inputs.h); "" when the signature has none.
  std::string provided_dir;
};

/// Asks a reference worker to write the provided inputs (TensorSpec::provided) of `workload`
/// under each of `seeds` into `dir` (provided_input_file names; the folder exists, the files
/// are created there), with the values the reference itself computes with for that seed. Only
/// the PyTorch reference worker answers it; kforge-worker refuses it (ok: false).
struct ProvideRequest {
  int handle = -1;  // the loaded task (the reference worker's load of the derived task)
  Signature signature;
  Workload workload;
  std::vector<uint64_t> seeds;
  std::string dir;
};
struct ProvideResult {
  Verdict verdict = Verdict::ok;  // ok, or runtime_error when the problem's code raised
  std::string message;
  int64_t bytes_written = 0;      // over every file
  double seconds = 0.0;           // the worker's time making and writing them
};
struct TimeResult {
  Verdict verdict = Verdict::ok;   // ok or runtime_error
  std::string message;
  std::vector<double> samples_ms;  // device time of each timed call, milliseconds
  std::vector<double> host_ms;     // host wall time of each call incl. device-wide sync, ms
  std::vector<int> sm_clock_mhz;   // SM clock read after each call; empty when not readable
  std::vector<bool> throttled;     // a thermal/power/hardware slowdown was active at that call
  double overhead_ms = 0.0;        // host-minus-device time of an empty timed bracket (median)
  int input_sets_used = 0;         // fewer than asked when memory would not hold them
  bool inputs_reused = false;      // the sets of the previous request (same key) were reused
  double setup_ms = 0.0;           // allocating, generating and uploading the input sets
  std::vector<CheckedCall> checked;  // one per check that ran, in call order
  /// Why the timed loop stopped: "noise" (the median's CI reached the target), "max_repetitions",
  /// or "max_seconds" (the time limit, warm-up included, cut the samples short).
  std::string stop_reason;
  double host_wall_ms = 0.0;       // host wall clock over the timed loop incl. flushes, ms
  /// Host wall time of each warm-up call incl. a device-wide synchronize, ms (fewer than asked
  /// when the time limit ran out during the warm-up).
  std::vector<double> warmup_ms;
  double check_ms = 0.0;           // hashing and writing checked outputs (not in any sample)
  /// "" or what a checked call wrote outside a tensor's storage (guard bands, over every call
  /// on that set so far: "wrote 4 bytes past output 'y'"); the first finding only.
  std::string guard_violation;
  /// "" or the work a checked call put outside args->stream ("timed call 3: 1 kernel ... on
  /// stream 14"): checked calls run inside the backend's work audit.
  std::string foreign_work;
  bool work_audited = false;       // at least one checked call ran inside a work audit
  /// Baseline "compile": the wall time of torch.compile plus the first call of the compiled
  /// module (tracing, code generation, autotuning; that call's own run too), ms. Never in the
  /// samples, the warm-up or max_seconds. 0 for "eager".
  double compile_ms = 0.0;
  bool compile_reused = false;       // an earlier request compiled it (compile_ms is that one's)
  /// Baseline "compile" failed because this PyTorch cannot compile at all (no torch.compile,
  /// Dynamo unsupported on this Python), not because of the module: verdict runtime_error.
  bool compile_unsupported = false;
};

void to_json(nlohmann::json& j, const HelloRequest& v);
void from_json(const nlohmann::json& j, HelloRequest& v);
void to_json(nlohmann::json& j, const DeviceInfo& v);
void from_json(const nlohmann::json& j, DeviceInfo& v);
void to_json(nlohmann::json& j, const LoadRequest& v);
void from_json(const nlohmann::json& j, LoadRequest& v);
void to_json(nlohmann::json& j, const LoadResult& v);
void from_json(const nlohmann::json& j, LoadResult& v);
void to_json(nlohmann::json& j, const RunRequest& v);
void from_json(const nlohmann::json& j, RunRequest& v);
void to_json(nlohmann::json& j, const RunResult& v);
void from_json(const nlohmann::json& j, RunResult& v);
void to_json(nlohmann::json& j, const MeasurementPolicy& v);
void from_json(const nlohmann::json& j, MeasurementPolicy& v);
void to_json(nlohmann::json& j, const TimedCheck& v);
void from_json(const nlohmann::json& j, TimedCheck& v);
void to_json(nlohmann::json& j, const VerifiedDigest& v);
void from_json(const nlohmann::json& j, VerifiedDigest& v);
void to_json(nlohmann::json& j, const CheckedCall& v);
void from_json(const nlohmann::json& j, CheckedCall& v);
void to_json(nlohmann::json& j, const TimeRequest& v);
void from_json(const nlohmann::json& j, TimeRequest& v);
void to_json(nlohmann::json& j, const TimeResult& v);
void from_json(const nlohmann::json& j, TimeResult& v);
void to_json(nlohmann::json& j, const ProvideRequest& v);
void from_json(const nlohmann::json& j, ProvideRequest& v);
void to_json(nlohmann::json& j, const ProvideResult& v);
void from_json(const nlohmann::json& j, ProvideResult& v);

}  // namespace kforge::worker

#include "worker/protocol.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"

namespace kforge::worker {
namespace {

using nlohmann::json;

template <typename T>
T round_trip(const T& value) {
  return json::parse(json(value).dump()).get<T>();
}

Signature sample_signature() {
  Signature signature;
  signature.tensors.push_back(TensorSpec{"x", TensorRole::input, DType::bf16, {"rows", "4"}});
  signature.tensors.push_back(TensorSpec{"y", TensorRole::output, DType::f32, {"rows"}});
  signature.scalars.push_back(ScalarSpec{"eps", DType::f32, 1e-6});
  return signature;
}

TEST(Protocol, CommandNamesRoundTrip) {
  for (Command command :
       {Command::hello, Command::load, Command::run, Command::time, Command::provide,
        Command::unload, Command::shutdown}) {
    EXPECT_EQ(parse_command(to_string(command)), command);
  }
  EXPECT_EQ(to_string(Command::time), "time");
  EXPECT_THROW(parse_command("halt"), Error);
}

TEST(Protocol, DeviceInfoRoundTrips) {
  DeviceInfo info;
  info.backend = "cuda";
  info.device_index = 3;
  info.name = "NVIDIA H200";
  info.compute_capability = "9.0";
  info.multiprocessor_count = 132;
  info.l2_bytes = 50331648;
  info.memory_bytes = int64_t{150} << 30;
  info.driver_version = "13.0";
  info.runtime_version = "13.0";
  const DeviceInfo back = round_trip(info);
  EXPECT_EQ(back.protocol_version, kProtocolVersion);
  EXPECT_EQ(back.name, info.name);
  EXPECT_EQ(back.device_index, 3);
  EXPECT_EQ(back.compute_capability, "9.0");
  EXPECT_EQ(back.multiprocessor_count, 132);
  EXPECT_EQ(back.l2_bytes, info.l2_bytes);
  EXPECT_EQ(back.memory_bytes, info.memory_bytes);
  EXPECT_EQ(back.driver_version, "13.0");
}

TEST(Protocol, LoadMessagesRoundTrip) {
  EXPECT_EQ(round_trip(LoadRequest{"/tmp/k.so"}).path, "/tmp/k.so");
  // A native load sends no task_path (kforge-worker never sees one); a Python candidate's does.
  EXPECT_FALSE(json(LoadRequest{"/tmp/k.so"}).contains("task_path"));
  EXPECT_EQ(round_trip(LoadRequest{"/tmp/m.py", "/run/task.json"}).task_path, "/run/task.json");
  const LoadResult back = round_trip(LoadResult{Verdict::wrong_signature, "no kforge_run", -1});
  EXPECT_EQ(back.verdict, Verdict::wrong_signature);
  EXPECT_EQ(back.message, "no kforge_run");
  EXPECT_EQ(back.handle, -1);
  EXPECT_EQ(json(LoadResult{}).at("verdict"), "ok");
}

TEST(Protocol, RunMessagesRoundTrip) {
  RunRequest request;
  request.handle = 2;
  request.signature = sample_signature();
  request.workload.name = "tail";
  request.workload.dims = {{"rows", 37}};
  request.seed = 0xFFFFFFFFFFFFFFFFull;
  request.distribution = "heavy_tailed";
  request.calls = 2;
  request.output_path = "/dev/shm/x.bin";
  request.remap = "half_rows";
  const RunRequest back = round_trip(request);
  EXPECT_EQ(back.handle, 2);
  ASSERT_EQ(back.signature.tensors.size(), 2u);
  EXPECT_EQ(back.signature.tensors[0].dtype, DType::bf16);
  EXPECT_EQ(back.signature.tensors[0].shape, (std::vector<std::string>{"rows", "4"}));
  EXPECT_EQ(back.signature.tensors[1].role, TensorRole::output);
  EXPECT_EQ(back.workload.dims.at("rows"), 37);
  EXPECT_EQ(back.seed, request.seed);
  EXPECT_EQ(back.distribution, "heavy_tailed");
  EXPECT_EQ(back.calls, 2);
  EXPECT_EQ(back.output_path, "/dev/shm/x.bin");
  EXPECT_EQ(back.remap, "half_rows");
  EXPECT_EQ(round_trip(RunRequest{}).remap, "none");
  // Only a profiled Python candidate's run names an NVTX range; kforge-worker never sees one.
  EXPECT_FALSE(json(request).contains("nvtx_range"));
  request.nvtx_range = "kforge_profiled_forward";
  EXPECT_EQ(round_trip(request).nvtx_range, "kforge_profiled_forward");

  RunResult result;
  result.verdict = Verdict::runtime_error;
  result.message = "kforge_run returned 3";
  result.calls_completed = 1;
  result.output_bytes = 148;
  result.input_modified = "'x' at [3]";
  result.guard_violation = "wrote 4 bytes past output 'y'";
  result.digests = {0x8000000000000001ULL, 7};
  result.call_ms = {0.5, std::numeric_limits<double>::infinity()};
  const RunResult result_back = round_trip(result);
  EXPECT_EQ(result_back.verdict, Verdict::runtime_error);
  EXPECT_EQ(result_back.message, result.message);
  EXPECT_EQ(result_back.output_bytes, 148);
  EXPECT_EQ(result_back.input_modified, "'x' at [3]");
  EXPECT_EQ(result_back.guard_violation, "wrote 4 bytes past output 'y'");
  EXPECT_EQ(result_back.digests, result.digests);
  ASSERT_EQ(result_back.call_ms.size(), 2u);
  EXPECT_TRUE(std::isinf(result_back.call_ms[1]));  // non-finite values travel as strings
  EXPECT_EQ(json(result).at("call_ms")[1], "inf");
  // A worker that does not check guard bands (the torch reference worker) omits the field.
  json without_guard = json(result);
  without_guard.erase("guard_violation");
  EXPECT_EQ(without_guard.get<RunResult>().guard_violation, "");
  EXPECT_TRUE(result_back.foreign_work.empty());
  EXPECT_FALSE(result_back.work_audited);
}

TEST(Protocol, ProvidedInputsTravelInRunTimeAndProvideMessages) {
  RunRequest run;
  run.signature = sample_signature();
  run.signature.tensors[0].provided = true;
  run.output_path = "/dev/shm/x.bin";
  EXPECT_FALSE(nlohmann::json(run).contains("provided_dir"));  // absent when unused
  run.provided_dir = "/dev/shm/kforge-eval-1/provided";
  RunRequest run_back = round_trip(run);
  EXPECT_EQ(run_back.provided_dir, run.provided_dir);
  EXPECT_TRUE(run_back.signature.tensors[0].provided);
  EXPECT_FALSE(run_back.signature.tensors[1].provided);
  TimeRequest time;
  time.signature = run.signature;
  time.provided_dir = "/tmp/p";
  EXPECT_EQ(round_trip(time).provided_dir, "/tmp/p");

  ProvideRequest provide;
  provide.handle = 3;
  provide.signature = run.signature;
  provide.workload.name = "gate_small";
  provide.workload.dims = {{"rows", 5}};
  provide.seeds = {1, 0xFFFFFFFFFFFFFFFFull};
  provide.dir = "/tmp/p";
  const ProvideRequest provide_back = round_trip(provide);
  EXPECT_EQ(provide_back.handle, 3);
  EXPECT_EQ(provide_back.seeds, provide.seeds);
  EXPECT_EQ(provide_back.dir, "/tmp/p");
  EXPECT_EQ(provide_back.workload.dims.at("rows"), 5);
  ProvideResult result;
  result.verdict = Verdict::runtime_error;
  result.message = "get_inputs() raised";
  result.bytes_written = 12;
  result.seconds = 0.5;
  const ProvideResult result_back = round_trip(result);
  EXPECT_EQ(result_back.verdict, Verdict::runtime_error);
  EXPECT_EQ(result_back.message, result.message);
  EXPECT_EQ(result_back.bytes_written, 12);
  EXPECT_THROW(nlohmann::json({{"handle", 1}}).get<ProvideRequest>(), nlohmann::json::exception);
}

TEST(Protocol, RunResultCarriesTheWorkAudit) {
  RunResult result;
  result.foreign_work = "call 2: 1 kernel ('k(float*)') on stream 14";
  result.work_audited = true;
  const RunResult back = round_trip(result);
  EXPECT_EQ(back.foreign_work, result.foreign_work);
  EXPECT_TRUE(back.work_audited);
  // A reply of a worker from before the audit reads as unaudited, with no finding.
  json old_reply = json(result);
  old_reply.erase("foreign_work");
  old_reply.erase("work_audited");
  const RunResult old_back = old_reply.get<RunResult>();
  EXPECT_TRUE(old_back.foreign_work.empty());
  EXPECT_FALSE(old_back.work_audited);
}

TEST(Protocol, TimeMessagesRoundTripAndDefault) {
  TimeRequest request;
  request.handle = 4;
  request.signature = sample_signature();
  request.workload.name = "llm";
  request.workload.dims = {{"rows", 8192}};
  request.workload.timed = true;
  request.seed = 42;
  request.policy = MeasurementPolicy{1, 9, 50, 0.002, 2.5};
  request.flush_l2 = false;
  request.checks = {{3, true, 77, "normal"}, {5, false, 0, "uniform"}};
  request.verified = {{77, "normal", 0xfedcba9876543210ULL}};
  request.check_path = "/dev/shm/r.bin";
  const TimeRequest back = round_trip(request);
  EXPECT_EQ(back.handle, 4);
  EXPECT_TRUE(back.workload.timed);
  EXPECT_EQ(back.seed, 42u);
  EXPECT_EQ(back.policy.warmup, 1);
  EXPECT_EQ(back.policy.min_repetitions, 9);
  EXPECT_EQ(back.policy.max_repetitions, 50);
  EXPECT_EQ(back.policy.target_relative_noise, 0.002);
  EXPECT_EQ(back.policy.max_seconds, 2.5);
  EXPECT_FALSE(back.flush_l2);
  ASSERT_EQ(back.checks.size(), 2u);
  EXPECT_EQ(back.checks[0].call, 3);
  EXPECT_TRUE(back.checks[0].overwrite);
  EXPECT_EQ(back.checks[0].seed, 77u);
  EXPECT_EQ(back.checks[0].distribution, "normal");
  EXPECT_FALSE(back.checks[1].overwrite);
  ASSERT_EQ(back.verified.size(), 1u);
  EXPECT_EQ(back.verified[0].digest, 0xfedcba9876543210ULL);  // above 2^53: sent as hex
  EXPECT_EQ(back.check_path, "/dev/shm/r.bin");
  EXPECT_EQ(back.baseline, "eager");
  request.baseline = "compile";
  EXPECT_EQ(round_trip(request).baseline, "compile");

  json minimal = json(request);
  for (const char* key :
       {"seed", "policy", "flush_l2", "checks", "verified", "input_sets", "baseline"}) {
    minimal.erase(key);
  }
  const TimeRequest defaults = minimal.get<TimeRequest>();
  EXPECT_EQ(defaults.policy.warmup, MeasurementPolicy{}.warmup);
  EXPECT_EQ(defaults.input_sets, TimeRequest{}.input_sets);
  EXPECT_TRUE(defaults.checks.empty());
  EXPECT_TRUE(defaults.verified.empty());
  EXPECT_TRUE(defaults.flush_l2);
  EXPECT_EQ(defaults.baseline, "eager");  // a client from before the field asks for eager

  TimeResult result;
  result.samples_ms = {0.5, 0.25, 0.125};
  result.host_ms = {0.6, 0.3, 0.2};
  result.throttled = {false, true, false};
  result.sm_clock_mhz = {1980, 1500, 1980};
  result.stop_reason = "noise";
  result.host_wall_ms = 1.5;
  result.warmup_ms = {4.0, 3.5};
  result.checked = {{3, 77, "normal", 0xffffffffffffffffULL, 4096, -1},
                    {5, 77, "normal", 0xffffffffffffffffULL, -1, 3}};
  const TimeResult result_back = round_trip(result);
  EXPECT_EQ(result_back.warmup_ms, result.warmup_ms);
  ASSERT_EQ(result_back.checked.size(), 2u);
  EXPECT_EQ(result_back.checked[0].digest, 0xffffffffffffffffULL);
  EXPECT_EQ(result_back.checked[0].offset, 4096);
  EXPECT_EQ(result_back.checked[1].same_as, 3);
  json bad_digest = json(result);
  bad_digest["checked"][0]["digest"] = "12";
  EXPECT_THROW(bad_digest.get<TimeResult>(), Error);
  EXPECT_EQ(result_back.samples_ms, result.samples_ms);
  EXPECT_EQ(result_back.host_ms, result.host_ms);
  EXPECT_EQ(result_back.throttled, result.throttled);
  EXPECT_EQ(result_back.sm_clock_mhz, result.sm_clock_mhz);
  EXPECT_EQ(result_back.stop_reason, "noise");
  EXPECT_EQ(result_back.host_wall_ms, 1.5);
  EXPECT_EQ(result_back.compile_ms, 0.0);
  EXPECT_FALSE(result_back.compile_reused);
}

TEST(Protocol, TimeResultCarriesTheCompileBaseline) {
  TimeResult result;
  result.compile_ms = 23456.5;
  result.compile_reused = true;
  result.compile_unsupported = true;
  const TimeResult back = round_trip(result);
  EXPECT_EQ(back.compile_ms, 23456.5);
  EXPECT_TRUE(back.compile_reused);
  EXPECT_TRUE(back.compile_unsupported);
  // A reply of a worker from before the fields (kforge-worker's own, a torch worker of another
  // version) reads as "nothing compiled".
  json old = json(result);
  for (const char* key : {"compile_ms", "compile_reused", "compile_unsupported"}) old.erase(key);
  const TimeResult defaults = old.get<TimeResult>();
  EXPECT_EQ(defaults.compile_ms, 0.0);
  EXPECT_FALSE(defaults.compile_reused);
  EXPECT_FALSE(defaults.compile_unsupported);
}

TEST(Protocol, HelloCarriesTheTokenAndTheMeasuredDevice) {
  EXPECT_EQ(round_trip(HelloRequest{"abc123"}).token, "abc123");
  DeviceInfo info;
  info.backend = "cuda";
  info.copy_bytes_per_s = 4.25e12;
  info.peak_flops_per_s = {{"bf16", 1e15}};
  info.sm_clock_mhz = 1980;
  const DeviceInfo back = round_trip(info);
  EXPECT_EQ(back.copy_bytes_per_s, 4.25e12);
  EXPECT_EQ(back.peak_flops_per_s.at("bf16"), 1e15);
  EXPECT_EQ(back.sm_clock_mhz, 1980);
}

TEST(Protocol, MissingRequiredFieldsThrow) {
  EXPECT_ANY_THROW(json::object().get<LoadRequest>());
  EXPECT_ANY_THROW((json{{"handle", 1}}).get<RunRequest>());
  EXPECT_ANY_THROW((json{{"verdict", "great"}}).get<LoadResult>());
}

}  // namespace
}  // namespace kforge::worker

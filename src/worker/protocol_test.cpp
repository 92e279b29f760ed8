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
       {Command::hello, Command::load, Command::check, Command::time, Command::shutdown}) {
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
  const LoadResult back = round_trip(LoadResult{Verdict::wrong_signature, "no kforge_run", -1});
  EXPECT_EQ(back.verdict, Verdict::wrong_signature);
  EXPECT_EQ(back.message, "no kforge_run");
  EXPECT_EQ(back.handle, -1);
  EXPECT_EQ(json(LoadResult{}).at("verdict"), "ok");
}

TEST(Protocol, CheckMessagesRoundTrip) {
  CheckRequest request;
  request.candidate_handle = 2;
  request.reference_handle = 1;
  request.signature = sample_signature();
  Workload workload;
  workload.name = "tail";
  workload.dims = {{"rows", 37}};
  request.workloads = {workload};
  request.seeds = {1, 0xFFFFFFFFFFFFFFFFull};
  request.tolerance = Tolerance{1e-2, 1e-3};
  const CheckRequest back = round_trip(request);
  EXPECT_EQ(back.candidate_handle, 2);
  EXPECT_EQ(back.reference_handle, 1);
  ASSERT_EQ(back.signature.tensors.size(), 2u);
  EXPECT_EQ(back.signature.tensors[0].dtype, DType::bf16);
  EXPECT_EQ(back.signature.tensors[0].shape, (std::vector<std::string>{"rows", "4"}));
  EXPECT_EQ(back.signature.tensors[1].role, TensorRole::output);
  EXPECT_EQ(back.workloads.at(0).dims.at("rows"), 37);
  EXPECT_EQ(back.seeds, request.seeds);
  EXPECT_EQ(back.tolerance.rtol, 1e-2);

  CheckResult result{Verdict::wrong_answer, "output 'y' at [3]", 0.5, 0.25, 2};
  CheckResult result_back = round_trip(result);
  EXPECT_EQ(result_back.verdict, Verdict::wrong_answer);
  EXPECT_EQ(result_back.message, result.message);
  EXPECT_EQ(result_back.max_abs_error, 0.5);
  EXPECT_EQ(result_back.max_rel_error, 0.25);
  EXPECT_EQ(result_back.cases_checked, 2);
}

TEST(Protocol, NonFiniteErrorsTravelAsStrings) {
  CheckResult result;
  result.max_abs_error = std::numeric_limits<double>::infinity();
  result.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  const json j = result;
  EXPECT_EQ(j.at("max_abs_error"), "inf");
  EXPECT_EQ(j.at("max_rel_error"), "nan");
  const CheckResult back = j.get<CheckResult>();
  EXPECT_TRUE(std::isinf(back.max_abs_error));
  EXPECT_TRUE(std::isnan(back.max_rel_error));
}

TEST(Protocol, TimeMessagesRoundTripAndDefault) {
  TimeRequest request;
  request.handle = 4;
  request.signature = sample_signature();
  request.workload.name = "llm";
  request.workload.dims = {{"rows", 8192}};
  request.workload.timed = true;
  request.seed = 42;
  request.warmup = 1;
  request.repetitions = 9;
  request.flush_l2 = false;
  request.max_seconds = 2.5;
  const TimeRequest back = round_trip(request);
  EXPECT_EQ(back.handle, 4);
  EXPECT_TRUE(back.workload.timed);
  EXPECT_EQ(back.seed, 42u);
  EXPECT_EQ(back.warmup, 1);
  EXPECT_EQ(back.repetitions, 9);
  EXPECT_FALSE(back.flush_l2);
  EXPECT_EQ(back.max_seconds, 2.5);

  json minimal = json(request);
  for (const char* key : {"seed", "warmup", "repetitions", "flush_l2", "max_seconds"}) {
    minimal.erase(key);
  }
  const TimeRequest defaults = minimal.get<TimeRequest>();
  EXPECT_EQ(defaults.warmup, TimeRequest{}.warmup);
  EXPECT_EQ(defaults.repetitions, TimeRequest{}.repetitions);
  EXPECT_TRUE(defaults.flush_l2);

  TimeResult result{Verdict::ok, "", {0.5, 0.25, 0.125}, 1.5};
  const TimeResult result_back = round_trip(result);
  EXPECT_EQ(result_back.samples_ms, result.samples_ms);
  EXPECT_EQ(result_back.host_wall_ms, 1.5);
}

TEST(Protocol, MissingRequiredFieldsThrow) {
  EXPECT_ANY_THROW(json::object().get<LoadRequest>());
  EXPECT_ANY_THROW((json{{"candidate_handle", 1}}).get<CheckRequest>());
  EXPECT_ANY_THROW((json{{"verdict", "great"}}).get<LoadResult>());
}

}  // namespace
}  // namespace kforge::worker

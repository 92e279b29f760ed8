// Provided inputs in the worker (provided_inputs.h): tensors whose values come from files the
// reference wrote, read where kforge-worker would generate, in runs and in every rotated set of
// a timing; a missing or short file is a harness error naming it. In-process, cpu backend.
#include "worker/provided_inputs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backends/backend.h"
#include "worker/kernel_runner.h"
#include "worker/test_cpu_kernels.h"
#include "worker/test_kernels.h"

namespace kforge::worker {
namespace {

using testing::file_floats;
using testing::unary_signature;
using testing::workload_n;

KernelEntry kernel(const std::string& name, const std::string& body) {
  return testing::load_cpu_unary_kernel("provided_" + name, body);
}

KernelEntry reference() {
  return kernel("twice", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
}

RunRequest unary_run(int64_t n) {
  RunRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("w", n);
  request.seed = 7;
  request.distribution = "normal";
  request.output_path = testing::scratch_dir() + "/provided_run_" + std::to_string(n) + ".bin";
  create_private_file(request.output_path);
  return request;
}

TimeRequest unary_time(int64_t n) {
  TimeRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("timed", n);
  request.seed = 100;
  request.policy = MeasurementPolicy{2, 7, 7, 0.0, 30.0};
  return request;
}

class ProvidedInputs : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceBackend> backend_ = backends::make_device_backend("cpu", 0);
};

TEST(ProvidedInputFile, NamesWorkloadSeedAndTensor) {
  EXPECT_EQ(provided_input_file("/d", "gate_tail", 18446744073709551615ull, 2),
            "/d/gate_tail.18446744073709551615.2.bin");
  Signature signature = unary_signature();
  EXPECT_TRUE(provided_tensors(signature).empty());
  signature.tensors[0].provided = true;
  EXPECT_EQ(provided_tensors(signature), std::vector<int>{0});
}

/// Writes `values` as the provided input `tensor` of (workload, seed) under `dir`.
void write_provided(const std::string& dir, const std::string& workload, uint64_t seed, int tensor,
                    const std::vector<float>& values) {
  std::filesystem::create_directories(dir);
  std::ofstream out(provided_input_file(dir, workload, seed, tensor), std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
}

TEST_F(ProvidedInputs, ProvidedInputsAreReadFromTheirFilesInsteadOfGenerated) {
  const std::string dir = testing::scratch_dir() + "/provided-run";
  std::vector<float> values(33);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 16.5f;
  write_provided(dir, "w", 7, 0, values);
  RunRequest request = unary_run(33);
  request.signature.tensors[0].provided = true;
  request.provided_dir = dir;
  RunResult result = run_outputs(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  std::vector<float> y = file_floats(request.output_path);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(y[i], 2 * values[i]) << i;
  // A strided provided input holds the same logical values, scattered.
  request.signature.tensors[0].strided = true;
  request.padded = true;
  const std::string strided_body =
      "const int64_t s = args->inputs[0].strides ? args->inputs[0].strides[0] : 1;\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i * s];";
  result = run_outputs(*backend_, kernel("honours_strides", strided_body), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  y = file_floats(request.output_path);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(y[i], 2 * values[i]) << i;
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(ProvidedInputs, AProvidedInputWithoutItsFileIsAHarnessErrorNamingIt) {
  RunRequest request = unary_run(33);
  request.signature.tensors[0].provided = true;
  try {
    run_outputs(*backend_, reference(), request);
    ADD_FAILURE() << "no provided_dir: expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' (provided by the reference): the request "
                                         "names no provided_dir"),
              std::string::npos)
        << e.what();
  }
  const std::string dir = testing::scratch_dir() + "/provided-short";
  write_provided(dir, "w", 7, 0, std::vector<float>(32, 1.0f));  // one element short
  request.provided_dir = dir;
  try {
    run_outputs(*backend_, reference(), request);
    ADD_FAILURE() << "short file: expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 128 bytes, expected 132"), std::string::npos)
        << e.what();
  }
  request.seed = 8;  // no file for this seed
  EXPECT_THROW(run_outputs(*backend_, reference(), request), Error);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(ProvidedInputs, TimingReadsTheProvidedInputsOfEveryRotatedSet) {
  const std::string dir = testing::scratch_dir() + "/provided-time";
  TimeRequest request = unary_time(1024);
  request.signature.tensors[0].provided = true;
  request.provided_dir = dir;
  request.input_sets = 3;
  for (uint64_t s = 0; s < 3; ++s) {
    write_provided(dir, request.workload.name, request.seed + s, 0,
                   std::vector<float>(1024, static_cast<float>(s)));
  }
  TimeResult result = run_time(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.input_sets_used, 3);
  // A set whose file is missing stops the request with the file's name.
  std::filesystem::remove(provided_input_file(dir, request.workload.name, request.seed + 2, 0));
  try {
    run_time(*backend_, reference(), request);
    ADD_FAILURE() << "missing file: expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read " + dir + "/timed.102.0.bin"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(backend_->live_bytes(), 0);
}

}  // namespace
}  // namespace kforge::worker

// The run and timing logic in-process on the cpu backend, with kernels built at test time.
#include "worker/kernel_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/backend.h"
#include "common/mapped_file.h"
#include "worker/host_data.h"
#include "worker/test_cpu_kernels.h"
#include "worker/test_kernels.h"

namespace kforge::worker {
namespace {

using testing::file_floats;
using testing::unary_signature;
using testing::workload_n;


KernelEntry kernel(const std::string& name, const std::string& body,
                   const std::string& prelude = "") {
  return testing::load_cpu_unary_kernel("runner_" + name, body, prelude);
}

KernelEntry reference() {
  return kernel("reference", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
}

std::vector<float> input_floats(int64_t n, uint64_t seed, InputDistribution distribution) {
  const std::vector<std::byte> bytes = make_input(DType::f32, n, seed, 0, distribution);
  std::vector<float> values(static_cast<size_t>(n));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::string output_file(const std::string& name) {
  const std::string path = testing::scratch_dir() + "/" + name + ".bin";
  create_private_file(path);
  return path;
}

/// The base name of a timing request's check files, with the files of its first four checks
/// created (the orchestrator creates one per check).
std::string check_files(const std::string& name) {
  const std::string base = testing::scratch_dir() + "/" + name;
  for (int k = 0; k < 4; ++k) create_private_file(check_file(base, static_cast<size_t>(k)));
  return base;
}

RunRequest unary_run(int64_t n, int calls = 1) {
  RunRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("w", n);
  request.seed = 7;
  request.distribution = "normal";
  request.calls = calls;
  request.output_path = output_file("run_" + std::to_string(n) + "_" + std::to_string(calls));
  return request;
}

class KernelRunner : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceBackend> backend_ = backends::make_device_backend("cpu", 0);
};

TEST_F(KernelRunner, RunWritesTheOutputsOfEveryCall) {
  RunRequest request = unary_run(37, 2);
  RunResult result = run_outputs(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.calls_completed, 2);
  EXPECT_EQ(result.output_bytes, 37 * 4);
  EXPECT_EQ(result.call_ms.size(), 2u);
  EXPECT_TRUE(result.input_modified.empty());
  EXPECT_TRUE(result.late_write.empty());
  EXPECT_EQ(result.guard_violation, "");
  const std::vector<float> x = input_floats(37, 7, InputDistribution::normal);
  const std::vector<float> y = file_floats(request.output_path);
  ASSERT_EQ(y.size(), 74u);
  for (size_t i = 0; i < 37; ++i) {
    EXPECT_EQ(y[i], 2 * x[i]) << i;
    EXPECT_EQ(y[37 + i], 2 * x[i]) << i;
  }
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, RemappedRunsFeedTheProbeInputs) {
  // The self-test probes: the kernel sees element e - e % 16 (every_16th) or, for a 1-D tensor
  // (every element a row), the second half repeating the first (half_rows), and the unchanged-
  // input check compares against the same remapped values.
  const std::vector<float> x = input_floats(37, 7, InputDistribution::normal);
  for (const std::string remap : {"every_16th", "half_rows"}) {
    RunRequest request = unary_run(37);
    request.remap = remap;
    const RunResult result = run_outputs(*backend_, reference(), request);
    ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
    EXPECT_TRUE(result.input_modified.empty()) << result.input_modified;
    const std::vector<float> y = file_floats(request.output_path);
    ASSERT_EQ(y.size(), 37u);
    for (size_t i = 0; i < 37; ++i) {
      const size_t source = remap == "every_16th" ? i - i % 16 : (i < 19 ? i : i - 19);
      EXPECT_EQ(y[i], 2 * x[source]) << remap << " " << i;
    }
  }
  RunRequest bad = unary_run(8);
  bad.remap = "strided";
  EXPECT_THROW(run_outputs(*backend_, reference(), bad), Error);
}

TEST_F(KernelRunner, UnwrittenElementsStayPoisoned) {
  KernelEntry partial =
      kernel("partial", "for (int64_t i = 0; i < n / 8 * 8; ++i) y[i] = 2 * x[i];");
  RunRequest request = unary_run(37);
  ASSERT_EQ(run_outputs(*backend_, partial, request).verdict, Verdict::ok);
  MappedFile file(request.output_path, MappedFile::Mode::read);
  for (int64_t byte = 32 * 4; byte < 37 * 4; ++byte) {
    EXPECT_EQ(file.data()[byte], std::byte{0xFF}) << byte;
  }
  EXPECT_NE(file.data()[0], std::byte{0xFF});
}

TEST_F(KernelRunner, ModifiedInputIsReportedWithItsIndex) {
  KernelEntry scribbler = kernel("scribbler",
                                 "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];\n"
                                 "  ((float*)x)[n - 1] = 12345;");
  RunResult result = run_outputs(*backend_, scribbler, unary_run(64));
  EXPECT_EQ(result.verdict, Verdict::ok);
  EXPECT_EQ(result.input_modified, "'x' at [63]");
}

TEST_F(KernelRunner, WorkFinishedAfterReturnIsALateWrite) {
  // A detached thread writes the answer 5 ms after kforge_run returned.
  KernelEntry late = kernel("late",
                            "std::thread([=] { usleep(5000);\n"
                            "    for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i]; }).detach();",
                            "#include <thread>\n#include <unistd.h>");
  RunRequest request = unary_run(16);
  request.late_write_wait_ms = 50;
  RunResult result = run_outputs(*backend_, late, request);
  EXPECT_EQ(result.verdict, Verdict::ok);
  EXPECT_EQ(result.late_write, "'y' at [0]");
}

TEST_F(KernelRunner, WritesOutsideATensorAreReportedWithSideAndBytes) {
  // Values no canary holds by chance at these offsets: 12345 and 1 as f32.
  const auto run = [&](const std::string& name, const std::string& extra, int calls = 1) {
    const std::string body = "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];\n  " + extra;
    return run_outputs(*backend_, kernel(name, body), unary_run(37, calls));
  };
  RunResult result = run("past_by_2", "y[n] = 12345; y[n + 1] = 12345;");
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;  // a verdict for the orchestrator
  EXPECT_EQ(result.guard_violation, "wrote 8 bytes past output 'y'");
  EXPECT_EQ(run("before_by_float4", "for (int k = 1; k <= 4; ++k) y[-k] = 1;").guard_violation,
            "wrote 16 bytes before output 'y'");
  result = run("past_input", "((float*)x)[n] = 1;");
  EXPECT_EQ(result.guard_violation, "wrote 4 bytes past input 'x'");
  EXPECT_EQ(result.input_modified, "");  // the storage itself is intact
  // Only the second call overruns: the bands are checked over every call.
  EXPECT_EQ(run("second_call", "static int calls = 0; if (++calls % 2 == 0) y[n] = 12345;", 2)
                .guard_violation,
            "wrote 4 bytes past output 'y'");
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, NonZeroReturnAndExceptionsAreRuntimeErrors) {
  RunResult result = run_outputs(*backend_, kernel("returns7", "return 7;"), unary_run(8));
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_NE(result.message.find("kforge_run returned 7"), std::string::npos) << result.message;
  KernelEntry throwing =
      kernel("throws", "throw std::runtime_error(\"boom\");", "#include <stdexcept>");
  result = run_outputs(*backend_, throwing, unary_run(8, 2));
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_NE(result.message.find("call 1: kforge_run threw an exception: boom"), std::string::npos)
      << result.message;
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, StridedInputsArePassedNonContiguousWhenPadded) {
  const std::string strided_body =
      "const int64_t s = args->inputs[0].strides ? args->inputs[0].strides[0] : 1;\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i * s];";
  RunRequest request = unary_run(33);
  request.signature.tensors[0].strided = true;
  request.padded = true;
  RunResult result = run_outputs(*backend_, kernel("honours_strides", strided_body), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_TRUE(result.input_modified.empty()) << result.input_modified;
  EXPECT_EQ(result.guard_violation, "");
  const std::vector<float> x = input_floats(33, 7, InputDistribution::normal);
  std::vector<float> y = file_floats(request.output_path);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(y[i], 2 * x[i]) << i;
  // A kernel that assumes a compact input reads the NaN gaps.
  ASSERT_EQ(run_outputs(*backend_, reference(), request).verdict, Verdict::ok);
  y = file_floats(request.output_path);
  EXPECT_TRUE(std::isnan(y[1]));
  // Without `padded` the same tensor is compact (strides null).
  request.padded = false;
  ASSERT_EQ(run_outputs(*backend_, reference(), request).verdict, Verdict::ok);
  y = file_floats(request.output_path);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(y[i], 2 * x[i]) << i;
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, PaddedRowsHaveAnOddPitch) {
  EXPECT_EQ(TensorSet::padded_strides({4, 9}), (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(TensorSet::padded_strides({2, 3, 5}), (std::vector<int64_t>{36, 12, 1}));
  EXPECT_EQ(TensorSet::padded_strides({10}), (std::vector<int64_t>{2}));
  EXPECT_EQ(TensorSet::storage_elements({4, 9}, {16, 1}), 3 * 16 + 8 + 1 + 7);
}

TEST_F(KernelRunner, ShapesAndScalarsReachTheKernel) {
  RunRequest request = unary_run(0);
  request.signature.tensors[0].shape = {"rows", "cols"};
  request.signature.tensors[1].shape = {"rows", "cols"};
  request.signature.scalars.push_back(ScalarSpec{"alpha", DType::f64, 3.0});
  request.workload.dims = {{"rows", 4}, {"cols", 9}};
  KernelEntry scaled = kernel(
      "scaled",
      "if (args->inputs[0].ndim != 2 || args->inputs[0].shape[1] != 9) return 3;\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (float)args->scalars[0];");
  RunResult result = run_outputs(*backend_, scaled, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  const std::vector<float> x = input_floats(36, 7, InputDistribution::normal);
  const std::vector<float> y = file_floats(request.output_path);
  for (size_t i = 0; i < 36; ++i) EXPECT_EQ(y[i], x[i] * 3.0f);
}

TEST_F(KernelRunner, ThousandsOfRunsLeakNoMemory) {
  KernelEntry wrong = kernel("wrong", "for (int64_t i = 0; i < n; ++i) y[i] = 3 * x[i];");
  RunRequest request = unary_run(100, 2);
  for (int i = 0; i < 1000; ++i) {
    run_outputs(*backend_, i % 2 ? reference() : wrong, request);
    ASSERT_EQ(backend_->live_bytes(), 0) << "after request " << i;
  }
}

TimeRequest unary_time(int64_t n) {
  TimeRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("timed", n);
  request.seed = 100;
  request.policy = MeasurementPolicy{2, 7, 7, 0.0, 30.0};
  return request;
}

TEST_F(KernelRunner, TimingReturnsDeviceAndHostTimes) {
  TimeResult result = run_time(*backend_, reference(), unary_time(1 << 16));
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  ASSERT_EQ(result.samples_ms.size(), 7u);
  ASSERT_EQ(result.host_ms.size(), 7u);
  double total_ms = 0;
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_GT(result.samples_ms[i], 0.0);
    EXPECT_GE(result.host_ms[i], result.samples_ms[i]);
    total_ms += result.samples_ms[i];
  }
  EXPECT_GE(result.host_wall_ms, total_ms);
  EXPECT_EQ(result.input_sets_used, 2);
  EXPECT_EQ(result.stop_reason, "max_repetitions");
  EXPECT_TRUE(result.checked.empty());
  EXPECT_EQ(result.warmup_ms.size(), 2u);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, TimingStopsOnceTheMedianIsPrecise) {
  TimeRequest request = unary_time(1 << 12);
  request.policy = MeasurementPolicy{1, 5, 100000, 1e9, 30.0};  // any spread is precise enough
  TimeResult result = run_time(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.samples_ms.size(), 5u);
  EXPECT_EQ(result.stop_reason, "noise");
}

TEST_F(KernelRunner, TimingStopsAtMaxSeconds) {
  TimeRequest request = unary_time(16);
  request.policy = MeasurementPolicy{0, 1, 1000, 0.0, 0.05};
  request.flush_l2 = false;
  KernelEntry slow =
      kernel("slow", "usleep(2000);\n  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
             "#include <unistd.h>");
  TimeResult result = run_time(*backend_, slow, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_GE(result.samples_ms.size(), 1u);
  EXPECT_LT(result.samples_ms.size(), 100u);
  EXPECT_EQ(result.stop_reason, "max_seconds");
}

// A fixed-length request (min = max repetitions, rung 1's rounds) whose calls outlast the limit
// still got every sample it asked for: it stopped at max_repetitions, not at its time limit
// (whose warning says samples were cut short).
TEST_F(KernelRunner, AFixedLengthRequestPastItsLimitStopsAtMaxRepetitions) {
  TimeRequest request = unary_time(16);
  request.policy = MeasurementPolicy{0, 4, 4, 0.0, 0.001};
  request.flush_l2 = false;
  KernelEntry slow =
      kernel("slow4", "usleep(2000);\n  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
             "#include <unistd.h>");
  TimeResult result = run_time(*backend_, slow, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.samples_ms.size(), 4u);
  EXPECT_EQ(result.stop_reason, "max_repetitions");
}

TEST_F(KernelRunner, CheckedCallRunsOnTheInputsItNames) {
  TimeRequest request = unary_time(256);
  request.checks = {{1, false, 0, "uniform"}, {3, true, 555, "heavy_tailed"}};
  request.check_path = check_files("check_honest");
  TimeResult result = run_time(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  ASSERT_EQ(result.checked.size(), 2u);
  // Call 1 uses set 1 (seed 101) as it is; call 3 uses set 1 too, overwritten with seed 555.
  EXPECT_EQ(result.checked[0].seed, 101u);
  EXPECT_EQ(result.checked[1].seed, 555u);
  EXPECT_EQ(result.checked[1].distribution, "heavy_tailed");
  ASSERT_EQ(result.checked[0].offset, 0);
  ASSERT_EQ(result.checked[1].offset, 0);
  std::vector<float> y = file_floats(check_file(request.check_path, 0));
  const std::vector<float> y1 = file_floats(check_file(request.check_path, 1));
  y.insert(y.end(), y1.begin(), y1.end());
  ASSERT_EQ(y.size(), 512u);
  const std::vector<float> x1 = input_floats(256, 101, InputDistribution::uniform);
  const std::vector<float> x2 = input_floats(256, 555, InputDistribution::heavy_tailed);
  for (size_t i = 0; i < 256; ++i) {
    EXPECT_EQ(y[i], 2 * x1[i]) << i;
    EXPECT_EQ(y[256 + i], 2 * x2[i]) << i;
  }
}

TEST_F(KernelRunner, VerifiedAndRepeatedOutputsAreNotWrittenAgain) {
  TimeRequest request = unary_time(256);
  request.checks = {{1, false, 0, "uniform"}, {3, false, 0, "uniform"}, {4, false, 0, "uniform"}};
  request.check_path = check_files("check_digests");
  const TimeResult first = run_time(*backend_, reference(), request);
  ASSERT_EQ(first.verdict, Verdict::ok) << first.message;
  ASSERT_EQ(first.checked.size(), 3u);
  // Calls 1 and 3 run on set 1 (seed 101): the same outputs, written once.
  EXPECT_GE(first.checked[0].offset, 0);
  EXPECT_EQ(first.checked[1].offset, -1);
  EXPECT_EQ(first.checked[1].same_as, 1);
  EXPECT_EQ(first.checked[1].digest, first.checked[0].digest);
  EXPECT_GE(first.checked[2].offset, 0);  // set 0, other inputs
  EXPECT_NE(first.checked[2].digest, first.checked[0].digest);
  request.verified = {{101, "uniform", first.checked[0].digest}};
  const TimeResult second = run_time(*backend_, reference(), request);
  ASSERT_EQ(second.checked.size(), 3u);
  EXPECT_EQ(second.checked[0].offset, -1);  // a verified digest: only reported
  EXPECT_EQ(second.checked[0].same_as, -1);
  EXPECT_GE(second.checked[2].offset, 0);
}

TEST_F(KernelRunner, GateDigestsAreTheDigestsOfTheSameOutputsInATimedCheck) {
  // The gate's digest of the outputs it compared lets a timed check on the same inputs skip its
  // read-back: both paths must hash the same bytes the same way.
  RunRequest run = unary_run(256, 2);
  run.workload = workload_n("timed", 256);
  run.digest = true;
  const RunResult gated = run_outputs(*backend_, reference(), run);
  ASSERT_EQ(gated.verdict, Verdict::ok) << gated.message;
  ASSERT_EQ(gated.digests.size(), 2u);
  EXPECT_EQ(gated.digests[0], gated.digests[1]);
  TimeRequest request = unary_time(256);
  request.checks = {{2, true, run.seed, run.distribution}};
  request.verified = {{run.seed, run.distribution, gated.digests[0]}};
  request.check_path = check_files("check_gate_digest");
  const TimeResult timed = run_time(*backend_, reference(), request);
  ASSERT_EQ(timed.checked.size(), 1u);
  EXPECT_EQ(timed.checked[0].digest, gated.digests[0]);
  EXPECT_EQ(timed.checked[0].offset, -1);  // verified by the gate: not written again
  RunRequest plain = unary_run(256);
  EXPECT_TRUE(run_outputs(*backend_, reference(), plain).digests.empty());  // only when asked
}

TEST_F(KernelRunner, SkippedWorkLeavesPoisonAtEveryCall) {
  // Computes on the first call of each input set only, then returns without writing: with the
  // outputs poisoned before every call, a later checked call on the same set reads NaN.
  KernelEntry lazy = kernel("lazy",
                            "static std::set<const void*> seen;\n"
                            "  if (!seen.insert(x).second) return 0;\n"
                            "  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
                            "#include <set>");
  TimeRequest request = unary_time(256);
  request.checks = {{5, false, 0, "uniform"}};
  request.check_path = check_files("check_lazy");
  TimeResult result = run_time(*backend_, lazy, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  const std::vector<float> y = file_floats(check_file(request.check_path, 0));
  ASSERT_EQ(y.size(), 256u);
  for (size_t i = 0; i < 256; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
}

TEST_F(KernelRunner, ReplayedResultsShowInTheCheck) {
  // Computes once per input pointer, then replays: a checked call with new values at a pointer
  // seen before returns stale outputs.
  KernelEntry replay = kernel("replay",
                              "static std::map<const void*, std::vector<float>> cache;\n"
                              "  auto& hit = cache[x];\n"
                              "  if (hit.empty()) { hit.resize(n);\n"
                              "    for (int64_t i = 0; i < n; ++i) hit[i] = 2 * x[i]; }\n"
                              "  for (int64_t i = 0; i < n; ++i) y[i] = hit[i];",
                              "#include <map>\n#include <vector>");
  TimeRequest request = unary_time(256);
  request.checks = {{4, true, 556, "uniform"}};
  request.check_path = check_files("check_replay");
  TimeResult result = run_time(*backend_, replay, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  const std::vector<float> x = input_floats(256, 556, InputDistribution::uniform);
  const std::vector<float> y = file_floats(check_file(request.check_path, 0));
  int stale = 0;
  for (size_t i = 0; i < 256; ++i) stale += y[i] != 2 * x[i];
  EXPECT_GT(stale, 200);
}

TEST_F(KernelRunner, RepeatedTimingRequestsReuseTheirInputSets) {
  TimingCache cache;
  TimeRequest request = unary_time(1 << 12);
  EXPECT_FALSE(run_time(*backend_, reference(), request, &cache).inputs_reused);
  const int64_t held = backend_->live_bytes();
  EXPECT_GT(held, 0);  // kept for the next request
  TimeResult again = run_time(*backend_, reference(), request, &cache);
  EXPECT_TRUE(again.inputs_reused);
  EXPECT_EQ(backend_->live_bytes(), held);
  request.seed += 1;  // another key: fresh sets, the old ones freed first
  EXPECT_FALSE(run_time(*backend_, reference(), request, &cache).inputs_reused);
  EXPECT_EQ(backend_->live_bytes(), held);
  // A check overwrites set 0's inputs for one call and restores them: the cache keeps the sets,
  // and a later check on set 0's own values runs on them, not on what the check wrote.
  request.checks = {{2, true, 777, "normal"}};
  request.check_path = check_files("check_cache");
  const TimeResult overwritten = run_time(*backend_, reference(), request, &cache);
  EXPECT_TRUE(overwritten.inputs_reused);
  ASSERT_EQ(overwritten.checked.size(), 1u);
  EXPECT_EQ(overwritten.checked[0].seed, 777u);
  request.checks = {{0, false, 0, "uniform"}, {2, false, 0, "uniform"}};
  const TimeResult after = run_time(*backend_, reference(), request, &cache);
  EXPECT_TRUE(after.inputs_reused);
  ASSERT_EQ(after.checked.size(), 2u);
  EXPECT_EQ(after.checked[0].seed, request.seed);
  EXPECT_EQ(after.checked[1].seed, request.seed);
  EXPECT_EQ(after.checked[1].digest, after.checked[0].digest);
  cache.sets.clear();
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, InvalidRequestsAreHarnessErrors) {
  RunRequest three_calls = unary_run(8);
  three_calls.calls = 3;
  EXPECT_THROW(run_outputs(*backend_, reference(), three_calls), Error);
  RunRequest unbound = unary_run(8);
  unbound.workload.dims.clear();
  EXPECT_THROW(run_outputs(*backend_, reference(), unbound), Error);
  RunRequest no_file = unary_run(8);
  no_file.output_path = testing::scratch_dir() + "/missing/never.bin";
  EXPECT_THROW(run_outputs(*backend_, reference(), no_file), Error);
  RunRequest bad_distribution = unary_run(8);
  bad_distribution.distribution = "cauchy";
  EXPECT_THROW(run_outputs(*backend_, reference(), bad_distribution), Error);
  TimeRequest late_check = unary_time(8);
  late_check.checks = {{7, false, 0, "uniform"}};  // never runs when min_repetitions = 7
  late_check.check_path = check_files("check_late");
  EXPECT_THROW(run_time(*backend_, reference(), late_check), Error);
  TimeRequest no_path = unary_time(8);
  no_path.checks = {{1, false, 0, "uniform"}};
  EXPECT_THROW(run_time(*backend_, reference(), no_path), Error);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST(MedianHalfWidth, ShrinksWithTightSamplesAndNeedsFive) {
  EXPECT_TRUE(std::isinf(median_relative_half_width({1, 2, 3, 4})));
  std::vector<double> tight(20, 1.0);
  EXPECT_EQ(median_relative_half_width(tight), 0.0);
  std::vector<double> spread;
  for (int i = 0; i < 21; ++i) spread.push_back(1.0 + 0.01 * i);
  const double width = median_relative_half_width(spread);
  EXPECT_GT(width, 0.01);
  EXPECT_LT(width, 0.1);
}

}  // namespace
}  // namespace kforge::worker

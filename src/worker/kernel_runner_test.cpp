// The check and timing logic in-process on the cpu backend, with kernels built at test time.
#include "worker/kernel_runner.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "worker/test_kernels.h"

namespace kforge::worker {
namespace {

using testing::build_cpu_kernel;
using testing::cpu_unary_kernel;
using testing::unary_signature;
using testing::workload_n;

KernelEntry load_entry(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw Error(dlerror());
  return reinterpret_cast<KernelEntry>(dlsym(library, "kforge_run"));
}

KernelEntry kernel(const std::string& name, const std::string& body,
                   const std::string& prelude = "") {
  return load_entry(build_cpu_kernel("runner_" + name, cpu_unary_kernel(body, prelude)));
}

KernelEntry reference() {
  return kernel("reference", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];");
}

CheckRequest unary_check() {
  CheckRequest request;
  request.signature = unary_signature();
  request.workloads = {workload_n("small", 64), workload_n("tail", 37)};
  request.seeds = {1, 2};
  return request;
}

class KernelRunner : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceBackend> backend_ = make_cpu_backend(0);
};

TEST_F(KernelRunner, CorrectKernelPassesEveryCase) {
  KernelEntry candidate = kernel("correct", "for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];");
  CheckResult result = run_check(*backend_, candidate, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.cases_checked, 4);
  EXPECT_EQ(result.max_abs_error, 0.0);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, SmallErrorsWithinToleranceAreReported) {
  KernelEntry candidate =
      kernel("close", "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i] * (1 + 1e-6f);");
  CheckResult result = run_check(*backend_, candidate, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_GT(result.max_abs_error, 0.0);
  EXPECT_GT(result.max_rel_error, 0.0);
  EXPECT_LT(result.max_rel_error, 1e-5);
}

TEST_F(KernelRunner, WrongKernelGetsAUsefulMessage) {
  KernelEntry candidate = kernel("wrong", "for (int64_t i = 0; i < n; ++i) y[i] = 3 * x[i];");
  CheckResult result = run_check(*backend_, candidate, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("workload 'small', seed 1"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("output 'y' at [0]"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("expected"), std::string::npos);
  EXPECT_EQ(result.cases_checked, 0);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, UnwrittenOutputIsCaughtByPoisoning) {
  // Skips the tail: right on multiples of 8 elements, wrong on the 37-element workload.
  KernelEntry candidate =
      kernel("partial", "for (int64_t i = 0; i < n / 8 * 8; ++i) y[i] = 2 * x[i];");
  CheckResult result = run_check(*backend_, candidate, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_EQ(result.cases_checked, 2);
  EXPECT_NE(result.message.find("workload 'tail'"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("at [32]: got nan"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("never written"), std::string::npos);
}

TEST_F(KernelRunner, ModifiedInputIsCaught) {
  KernelEntry candidate = kernel("scribbler",
                                 "for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];\n"
                                 "  ((float*)x)[n - 1] = 0;");
  CheckResult result = run_check(*backend_, candidate, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("input 'x' was modified at [63]"), std::string::npos)
      << result.message;
}

TEST_F(KernelRunner, NonZeroReturnAndExceptionsAreRuntimeErrors) {
  KernelEntry failing = kernel("returns7", "return 7;");
  CheckResult result = run_check(*backend_, failing, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_NE(result.message.find("kforge_run returned 7"), std::string::npos) << result.message;

  KernelEntry throwing =
      kernel("throws", "throw std::runtime_error(\"boom\");", "#include <stdexcept>");
  result = run_check(*backend_, throwing, reference(), unary_check());
  EXPECT_EQ(result.verdict, Verdict::runtime_error);
  EXPECT_NE(result.message.find("boom"), std::string::npos) << result.message;
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, MultiDimensionalIndexAndScalarsReachTheKernel) {
  // y[r, c] = x[r, c] * alpha where alpha is a scalar; the candidate ignores alpha in row 2.
  const std::string body =
      "const int64_t cols = args->inputs[0].shape[1];\n"
      "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (float)args->scalars[0];\n"
      "  if (args->inputs[0].ndim == 2 && args->num_scalars == 1) y[2 * cols + 5] = x[2 * cols + "
      "5];";
  CheckRequest request = unary_check();
  request.signature.tensors[0].shape = {"rows", "cols"};
  request.signature.tensors[1].shape = {"rows", "cols"};
  request.signature.scalars.push_back(ScalarSpec{"alpha", DType::f64, 2.0});
  Workload workload;
  workload.name = "matrix";
  workload.dims = {{"rows", 4}, {"cols", 9}};
  request.workloads = {workload};
  CheckResult result = run_check(
      *backend_, kernel("scaled_bug", body),
      kernel("scaled", "for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (float)args->scalars[0];"),
      request);
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("output 'y' at [2, 5]"), std::string::npos) << result.message;
}

TEST_F(KernelRunner, HalfPrecisionOutputsArePoisonedToo) {
  // Copies the f16 bits of x to y except the last element.
  const std::string body =
      "const uint16_t* hx = (const uint16_t*)x; uint16_t* hy = (uint16_t*)y;\n"
      "  for (int64_t i = 0; i + 1 < n; ++i) hy[i] = hx[i];";
  CheckRequest request = unary_check();
  request.signature = unary_signature(DType::f16);
  request.tolerance = Tolerance{1e-3, 1e-3};
  KernelEntry copy_all =
      kernel("f16_copy",
             "const uint16_t* hx = (const uint16_t*)x; uint16_t* hy = (uint16_t*)y;\n"
             "  for (int64_t i = 0; i < n; ++i) hy[i] = hx[i];");
  EXPECT_EQ(run_check(*backend_, copy_all, copy_all, request).verdict, Verdict::ok);
  CheckResult result = run_check(*backend_, kernel("f16_partial", body), copy_all, request);
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("at [63]: got nan"), std::string::npos) << result.message;
}

TEST_F(KernelRunner, ThousandsOfChecksLeakNoMemory) {
  KernelEntry candidate = kernel("correct", "for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];");
  KernelEntry wrong = kernel("wrong", "for (int64_t i = 0; i < n; ++i) y[i] = 3 * x[i];");
  CheckRequest request = unary_check();
  for (int i = 0; i < 2000; ++i) {
    run_check(*backend_, i % 2 ? candidate : wrong, reference(), request);
    ASSERT_EQ(backend_->live_bytes(), 0) << "after request " << i;
  }
}

TEST_F(KernelRunner, TimingReturnsTheRequestedSamples) {
  TimeRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("timed", 1 << 16);
  request.warmup = 2;
  request.repetitions = 7;
  TimeResult result = run_time(*backend_, reference(), request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  ASSERT_EQ(result.samples_ms.size(), 7u);
  double total_ms = 0;
  for (double sample : result.samples_ms) {
    EXPECT_GT(sample, 0.0);
    total_ms += sample;
  }
  EXPECT_GE(result.host_wall_ms, total_ms);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

TEST_F(KernelRunner, TimingStopsAtMaxSeconds) {
  TimeRequest request;
  request.signature = unary_signature();
  request.workload = workload_n("timed", 16);
  request.warmup = 0;
  request.repetitions = 1000;
  request.flush_l2 = false;
  request.max_seconds = 0.05;
  KernelEntry slow =
      kernel("slow", "usleep(2000);\n  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];",
             "#include <unistd.h>");
  TimeResult result = run_time(*backend_, slow, request);
  ASSERT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_GE(result.samples_ms.size(), 1u);
  EXPECT_LT(result.samples_ms.size(), 100u);
}

TEST_F(KernelRunner, InvalidRequestsAreHarnessErrors) {
  CheckRequest no_seeds = unary_check();
  no_seeds.seeds.clear();
  EXPECT_THROW(run_check(*backend_, reference(), reference(), no_seeds), Error);
  CheckRequest unbound = unary_check();
  unbound.workloads[0].dims.clear();
  EXPECT_THROW(run_check(*backend_, reference(), reference(), unbound), Error);
  KernelEntry failing = kernel("returns7", "return 7;");
  EXPECT_THROW(run_check(*backend_, reference(), failing, unary_check()), Error);
  EXPECT_EQ(backend_->live_bytes(), 0);
}

}  // namespace
}  // namespace kforge::worker

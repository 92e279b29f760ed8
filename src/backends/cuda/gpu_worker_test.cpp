// The cuda backend end to end: kernels compiled with nvcc at test time, run by a cuda worker.
// Suites are named Gpu* (labelled `gpu` by CMake); each skips itself without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/scratch_dir.h"
#include "backends/backend.h"
#include "evaluation/gate.h"
#include "evaluation/reference_oracle.h"
#include "backends/cuda/cuda_inputs.h"
#include "worker/device_backend.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge::worker {
namespace {

constexpr double kTimeoutS = 120.0;

/// y = 2 * x, one thread per element; `store` is the statement that writes element i.
std::string cuda_unary_kernel(const std::string& store) {
  return "#include <kforge/kernel.h>\n#include <cuda_runtime.h>\n"
         "__global__ void unary(const float* x, float* y, int64_t n) {\n"
         "  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
         "  " +
         store +
         "\n}\n"
         "KFORGE_API int kforge_run(const kforge_args* args) {\n"
         "  const int64_t n = kforge_numel(&args->inputs[0]);\n"
         "  const int threads = 256;\n"
         "  const int blocks = (int)((n + threads - 1) / threads);\n"
         "  unary<<<blocks, threads, 0, (cudaStream_t)args->stream>>>(\n"
         "      (const float*)args->inputs[0].data, (float*)args->outputs[0].data, n);\n"
         "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n}\n";
}

class GpuWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcessWorkerConfig config;
    config.worker_path = testing::worker_path();
    config.backend = "cuda";
    config.measure_device = true;
    worker_ = std::make_unique<ProcessWorker>(config);
    try {
      info_ = worker_->device_info();
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable CUDA device: " << e.what();
    }
    const process::CommandResult nvcc =
        process::run_command({testing::nvcc_path(), "--version"}, 60);
    if (!nvcc.succeeded()) GTEST_SKIP() << "nvcc not usable: " << nvcc.output;
    reference_worker_ = std::make_unique<ProcessWorker>(testing::worker_path(), "cuda", 0);
    task_.name = "double";
    task_.signature = testing::unary_signature();
    task_.workloads = {testing::workload_n("small", 4096), testing::workload_n("tail", 1031)};
    task_.tolerance = Tolerance{1e-4, 1e-5, std::nullopt};
    oracle_ = std::make_unique<evaluation::ReferenceOracle>(*reference_worker_, task_, scratch_,
                                                            kTimeoutS);
    compile::Artifact reference;
    reference.path = testing::build_cuda_kernel(
        "gpu_reference", cuda_unary_kernel("if (i < n) y[i] = 2.0f * x[i];"));
    oracle_->load(reference);
    cases_ = evaluation::plan_gate(task_, {2, 1});
  }

  int load(const std::string& name, const std::string& store) {
    const std::string path = testing::build_cuda_kernel(name, cuda_unary_kernel(store));
    const LoadResult result = worker_->load(LoadRequest{path}, kTimeoutS);
    EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
    return result.handle;
  }

  evaluation::GateOutcome check(int candidate) {
    return evaluation::run_gate(*worker_, candidate, *oracle_, task_, cases_, scratch_, kTimeoutS);
  }

  std::unique_ptr<ProcessWorker> worker_;
  std::unique_ptr<ProcessWorker> reference_worker_;
  DeviceInfo info_;
  Task task_;
  ScratchDir scratch_{"kforge-gpu-test"};
  std::unique_ptr<evaluation::ReferenceOracle> oracle_;
  std::vector<evaluation::GateCase> cases_;
};

TEST_F(GpuWorker, LoadCheckAndTimeASmallKernel) {
  EXPECT_EQ(info_.backend, "cuda");
  EXPECT_FALSE(info_.compute_capability.empty());
  EXPECT_GT(info_.l2_bytes, 0);
  const int candidate = load("gpu_correct", "if (i < n) y[i] = x[i] + x[i];");
  const evaluation::GateOutcome result = check(candidate);
  EXPECT_EQ(result.verdict, Verdict::ok) << result.message;
  EXPECT_EQ(result.cases_checked, 8);  // 2 workloads x (2 seeds + the pareto and spike cases)

  TimeRequest request;
  request.handle = candidate;
  request.signature = testing::unary_signature();
  request.workload = testing::workload_n("timed", 1 << 22);
  request.policy = worker::MeasurementPolicy{3, 25, 25, 0.0, 30.0};
  const TimeResult timing = worker_->time(request, kTimeoutS);
  ASSERT_EQ(timing.verdict, Verdict::ok) << timing.message;
  ASSERT_EQ(timing.samples_ms.size(), 25u);
  for (double sample_ms : timing.samples_ms) EXPECT_GT(sample_ms, 0.0);
  EXPECT_GT(timing.host_wall_ms, 0.0);
  EXPECT_EQ(timing.input_sets_used, 2);
  EXPECT_GT(info_.copy_bytes_per_s, 1e11);  // any GPU copies faster than 100 GB/s
  EXPECT_GT(info_.peak_flops_per_s.at("f32"), 1e12);
}

TEST_F(GpuWorker, UnwrittenTailIsCaughtByNaNPoisoning) {
  const evaluation::GateOutcome result =
      check(load("gpu_partial", "if (i < n / 256 * 256) y[i] = 2.0f * x[i];"));
  EXPECT_EQ(result.verdict, Verdict::wrong_answer);
  EXPECT_NE(result.message.find("workload 'tail'"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find(" is nan"), std::string::npos) << result.message;
}

TEST_F(GpuWorker, IllegalAddressIsARuntimeErrorAndTheWorkerIsRespawned) {
  const int correct = load("gpu_correct", "if (i < n) y[i] = x[i] + x[i];");
  const int bad =
      load("gpu_illegal_address", "if (i == 0) *(volatile float*)(uintptr_t)16 = 1.0f;");
  const int first_pid = worker_->pid();
  const evaluation::GateOutcome result = check(bad);
  EXPECT_EQ(result.verdict, Verdict::runtime_error) << result.message;
  EXPECT_NE(result.message.find("cudaErrorIllegalAddress"), std::string::npos) << result.message;
  EXPECT_EQ(worker_->pid(), -1);  // it announced its exit and was reaped

  const evaluation::GateOutcome after = check(correct);
  EXPECT_EQ(after.verdict, Verdict::ok) << after.message;
  EXPECT_EQ(worker_->spawn_count(), 2);
  EXPECT_NE(worker_->pid(), first_pid);
}

// The work audit of the cuda backend in this process: the backend's own work on its stream is
// no finding; the same work on a created stream, the legacy default stream or the per-thread
// default stream is. The audit must be available wherever a CUDA device is.
class GpuWorkAudit : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      backend_ = backends::make_device_backend("cuda", 0);
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable CUDA device: " << e.what();
    }
    buffer_ = backend_->allocate(kBytes);
    scratch_ = backend_->allocate(8);
  }
  void TearDown() override {
    if (!backend_) return;
    backend_->release(buffer_);
    backend_->release(scratch_);
  }

  /// A kernel (the hash), a memset and a memcpy on `stream`, in one audit window.
  std::string audit_work_on(cudaStream_t stream) {
    EXPECT_TRUE(backend_->begin_work_audit())
        << "the work audit is unavailable on a CUDA device (libcupti? see stderr)";
    uint64_t hash = 0;
    EXPECT_EQ(cuda_inputs::content_hash(buffer_, kBytes, stream, scratch_, &hash), 0);
    EXPECT_EQ(cudaMemsetAsync(buffer_, 1, kBytes, stream), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(&hash, buffer_, sizeof hash, cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
    backend_->synchronize();
    return backend_->end_work_audit();
  }

  static constexpr int64_t kBytes = int64_t{1} << 20;
  std::unique_ptr<DeviceBackend> backend_;
  void* buffer_ = nullptr;
  void* scratch_ = nullptr;
};

TEST_F(GpuWorkAudit, WorkOnTheWorkersStreamIsNoFinding) {
  EXPECT_EQ(audit_work_on(static_cast<cudaStream_t>(backend_->stream())), "");
  // The backend's own operations on its stream, the kind kforge does around a candidate.
  ASSERT_TRUE(backend_->begin_work_audit());
  backend_->fill_bytes(buffer_, 0xFF, kBytes);
  backend_->flush_l2();
  backend_->start_timer();
  backend_->stop_timer_ms();
  backend_->synchronize();
  EXPECT_EQ(backend_->end_work_audit(), "");
}

TEST_F(GpuWorkAudit, WorkOnAnyOtherStreamIsAFinding) {
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  const std::string on_side = audit_work_on(side);
  cudaStreamDestroy(side);
  EXPECT_NE(on_side.find("kernel"), std::string::npos) << on_side;
  EXPECT_NE(on_side.find("memcpy"), std::string::npos) << on_side;
  EXPECT_NE(on_side.find("memset"), std::string::npos) << on_side;
  EXPECT_NE(on_side.find("on stream "), std::string::npos) << on_side;
  EXPECT_EQ(on_side.find("another CUDA context"), std::string::npos) << on_side;
  const std::string on_legacy = audit_work_on(cudaStreamLegacy);
  EXPECT_NE(on_legacy.find("on stream "), std::string::npos) << on_legacy;
  const std::string on_per_thread = audit_work_on(cudaStreamPerThread);
  EXPECT_NE(on_per_thread.find("on stream "), std::string::npos) << on_per_thread;
  // Findings belong to their window only.
  EXPECT_EQ(audit_work_on(static_cast<cudaStream_t>(backend_->stream())), "");
}

TEST_F(GpuWorkAudit, AWindowCostsLittleAndANestedOneIsAnError) {
  std::vector<double> window_ms;
  for (int i = 0; i < 21; ++i) {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(backend_->begin_work_audit());
    EXPECT_EQ(backend_->end_work_audit(), "");
    window_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(window_ms.begin(), window_ms.end());
  std::printf("work audit: an empty window (begin + end) costs %.3f ms (median of 21), "
              "%.3f ms at most (the first window included)\n",
              window_ms[10], window_ms.back());
  RecordProperty("window_ms_median", std::to_string(window_ms[10]));
  EXPECT_LT(window_ms[10], 5.0);  // per timed call it must stay far below a kernel's setup
  ASSERT_TRUE(backend_->begin_work_audit());
  EXPECT_THROW(backend_->begin_work_audit(), Error);
  EXPECT_EQ(backend_->end_work_audit(), "");
}

}  // namespace
}  // namespace kforge::worker

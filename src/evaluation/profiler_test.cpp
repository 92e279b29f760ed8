#include "evaluation/profiler.h"

#include <gtest/gtest.h>

#include <iostream>

#include "worker/test_kernels.h"

namespace kforge::evaluation {
namespace {

// The shape of `ncu --csv --page raw --print-units base` output (Nsight Compute 2025): the tool's
// own lines, a header, a units line, then one row per kernel launch.
constexpr const char* kNcuOutput =
    "==PROF== Connected to process 4242 (/opt/kforge/kforge-worker)\n"
    "==PROF== Profiling \"block_softmax\" - 0: 0%....50%....100% - 9 passes\n"
    "==PROF== Disconnected from process 4242\n"
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\","
    "\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"dram__bytes_read.sum\","
    "\"dram__bytes_write.sum\",\"dram__throughput.avg.pct_of_peak_sustained_elapsed\","
    "\"gpu__time_duration.sum\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\","
    "\"sm__warps_active.avg.pct_of_peak_sustained_active\",\"launch__registers_per_thread\","
    "\"launch__occupancy_limit_registers\",\"launch__occupancy_limit_warps\"\n"
    "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"byte\",\"byte\",\"%\",\"ns\",\"%\","
    "\"%\",\"register/thread\",\"block\",\"block\"\n"
    "\"0\",\"4242\",\"kforge-worker\",\"127.0.0.1\",\"void block_softmax<256, \"\"f\"\">(const "
    "float *, float *, long)\",\"1\",\"13\",\"(256, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\","
    "\"6,442,450,944\",\"6442450944\",\"88.5\",\"3400000\",\"21.2\",\"80.1\",\"32\",\"8\",\"8\"\n"
    "\"1\",\"4242\",\"kforge-worker\",\"127.0.0.1\",\"finish(float *)\",\"1\",\"13\","
    "\"(32, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"0\",\"0\",\"0.1\",\"600000\",\"0.2\",\"3.0\","
    "\"16\",\"n/a\",\"64\"\n";

TEST(NcuCsv, ParsesKernelsAndMetricsSkippingToolLines) {
  const std::vector<KernelProfile> kernels = parse_ncu_csv(kNcuOutput);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].name, "void block_softmax<256, \"f\">(const float *, float *, long)");
  EXPECT_EQ(kernels[0].grid, "(4096, 1, 1)");
  EXPECT_EQ(kernels[0].block, "(256, 1, 1)");
  EXPECT_EQ(kernels[0].metrics.at("dram__bytes_read.sum"), 6442450944.0);  // separators dropped
  EXPECT_EQ(kernels[0].metrics.at("gpu__time_duration.sum"), 3400000.0);
  EXPECT_EQ(kernels[1].metrics.count("launch__occupancy_limit_registers"), 0u);  // "n/a"
  EXPECT_EQ(kernels[1].metrics.at("launch__occupancy_limit_warps"), 64.0);
  EXPECT_EQ(kernels[0].metrics.count("CC"), 0u) << "only metric columns";
}

TEST(NcuCsv, NoHeaderIsAnError) {
  EXPECT_THROW(parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"),
               Error);
}

TEST(ProfileDiagnosis, NamesTheLimiterTrafficAndOccupancy) {
  const std::vector<KernelProfile> kernels = parse_ncu_csv(kNcuOutput);
  // Duration-weighted: DRAM (88.5 * 3.4 + 0.1 * 0.6) / 4.0 = 75.24%, SM (21.2 * 3.4 + 0.2 * 0.6)
  // / 4.0 = 18.05%: memory-bound. Traffic 2 x 6442450944 bytes over a minimum of 6442450944.
  const std::vector<std::string> findings = diagnose(kernels, 6442450944.0);
  ASSERT_GE(findings.size(), 4u);
  EXPECT_EQ(findings[0], "2 kernel launch(es), 4000.0 us on the device");
  EXPECT_NE(findings[1].find("memory-bound: DRAM throughput 75% of peak (SM 18%)"),
            std::string::npos)
      << findings[1];
  EXPECT_NE(findings[2].find("2.00x the 6.44e+03 MB"), std::string::npos) << findings[2];
  // Occupancy (80.1 * 3.4 + 3.0 * 0.6) / 4.0 = 68.535%; the longest kernel is limited by
  // registers and warps equally (8): the first listed wins.
  EXPECT_NE(findings[3].find("achieved occupancy 69%"), std::string::npos) << findings[3];
  EXPECT_NE(findings[3].find("limited by registers (8), 32 registers per thread"),
            std::string::npos)
      << findings[3];
}

TEST(ProfileDiagnosis, LatencyBoundWhenNothingIsBusy) {
  KernelProfile k;
  k.metrics = {{"gpu__time_duration.sum", 5000},
               {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 10},
               {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12}};
  const auto findings = diagnose({k}, 0);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[1].rfind("latency-bound", 0), 0u) << findings[1];
  EXPECT_TRUE(diagnose({}, 100).empty());
}

TEST(NcuProfiler, AFailingProfilerIsReportedNotThrown) {
  // A "profiler" that exits at once: the worker never answers its hello.
  worker::ProcessWorkerConfig config;
  config.worker_path = worker::testing::worker_path();
  config.backend = "cpu";
  config.startup_timeout_s = 10;
  ScratchDir scratch;
  NcuProfiler profiler(config, "/bin/false", scratch, 10);
  Task task;
  task.signature = worker::testing::unary_signature();
  compile::Artifact artifact;
  artifact.path = "/nonexistent.so";
  const ProfileReport report =
      profiler.profile(artifact, task, worker::testing::workload_n("small", 16), {});
  EXPECT_FALSE(report.ok);
  EXPECT_NE(report.message.find("could not run the candidate under ncu"), std::string::npos)
      << report.message;
  EXPECT_EQ(report.workload, "small");
}

}  // namespace
}  // namespace kforge::evaluation

namespace kforge::evaluation {
namespace {

TEST(GpuProfiler, ProfilesTheCandidatesKernelOnly) {
  const std::optional<std::string> ncu = find_ncu();
  if (!ncu) GTEST_SKIP() << "no ncu";
  worker::ProcessWorkerConfig config;
  config.worker_path = worker::testing::worker_path();
  config.backend = "cuda";
  try {
    worker::ProcessWorker probe(config);
    probe.device_info();
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable CUDA device: " << e.what();
  }
  compile::Artifact artifact;
  artifact.path = worker::testing::build_cuda_kernel(
      "profiled_scale",
      "#include <kforge/kernel.h>\n#include <cuda_runtime.h>\n"
      "__global__ void scale_by_two(const float* x, float* y, int64_t n) {\n"
      "  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = 2.0f * x[i];\n}\n"
      "KFORGE_API int kforge_run(const kforge_args* args) {\n"
      "  const int64_t n = kforge_numel(&args->inputs[0]);\n"
      "  scale_by_two<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)args->stream>>>(\n"
      "      (const float*)args->inputs[0].data, (float*)args->outputs[0].data, n);\n"
      "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n}\n");
  Task task;
  task.signature = worker::testing::unary_signature();
  ScratchDir scratch;
  NcuProfiler profiler(config, *ncu, scratch, 300);
  const ProfileReport report =
      profiler.profile(artifact, task, worker::testing::workload_n("large", 1 << 26), {});
  if (!report.ok && report.message.find("no counter") != std::string::npos) {
    GTEST_SKIP() << "ncu cannot read counters here: " << report.message;
  }
  ASSERT_TRUE(report.ok) << report.message;
  ASSERT_EQ(report.kernels.size(), 1u) << "inputs were generated on the host: no harness kernel";
  EXPECT_NE(report.kernels[0].name.find("scale_by_two"), std::string::npos)
      << report.kernels[0].name;
  EXPECT_GT(report.kernels[0].metrics.at("gpu__time_duration.sum"), 0.0);
  // 2^26 floats in and out: 512 MiB of DRAM traffic at least.
  EXPECT_GT(report.kernels[0].metrics.at("dram__bytes_read.sum") +
                report.kernels[0].metrics.at("dram__bytes_write.sum"),
            0.9 * 2 * 4 * (1 << 26));
  ASSERT_GE(report.diagnosis.size(), 3u);
  // A streaming kernel with one element per thread: limited by memory or by latency (H200:
  // DRAM at 54% of peak, "latency-bound"), never by arithmetic.
  EXPECT_EQ(report.diagnosis[1].find("compute-bound"), std::string::npos) << report.diagnosis[1];
  EXPECT_EQ(report.diagnosis[2].rfind("DRAM traffic", 0), 0u) << report.diagnosis[2];
  for (const auto& line : report.diagnosis) std::cout << "  " << line << "\n";
}

}  // namespace
}  // namespace kforge::evaluation

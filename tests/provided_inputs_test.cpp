// Provided inputs end to end: a PyTorch problem whose bool mask and class ids must come from its
// own get_inputs() (python/tests/problems/masked_pick.py) is derived into a task with those inputs
// marked provided; the torch reference worker writes them for every seed the evaluation uses,
// and kforge-worker hands them to native kernels. A kernel that reads the mask and the ids passes
// the gate and is timed; kernels that assume an all-true mask or id 0 (right on some other
// values, wrong on the problem's) fail it. On cpu (ProvidedInputsTest) and on a GPU
// (GpuProvidedInputsTest, skipped without one), with the kernels of tests/data/provided/.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/files.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "task/torch_task.h"
#include "worker/sandbox.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

std::string data_dir() { return worker::testing::source_root() + "/tests/data/provided"; }

evaluation::EvaluationPolicy quick_policy() {
  evaluation::EvaluationPolicy policy;
  policy.load_timeout_s = 60.0;
  policy.run_timeout_s = 120.0;
  policy.time_timeout_s = 120.0;
  policy.quick = {1, 5, 10, 0.05, 2.0};
  return policy;
}

// One prepared Evaluator per backend: the torch reference worker on that backend, kforge-worker
// for the candidates.
struct Harness {
  std::unique_ptr<Task> task;
  std::unique_ptr<worker::ProcessWorker> reference;
  std::unique_ptr<worker::ProcessWorker> candidates;
  std::unique_ptr<evaluation::Evaluator> evaluator;
  std::string skip;   // why this backend cannot run here
  std::string error;  // preparing failed
};

void prepare(Harness& harness, const std::string& backend) {
  if (backends::find_backend(backend) == nullptr) {
    harness.skip = "the " + backend + " backend is not in this build";
    return;
  }
  // The Python with torch is found as kforge finds it (KFORGE_PYTHON, python3, /usr/bin/python3):
  // the one this build was configured with need not be the one on the GPU machine.
  ::setenv("KFORGE_INPUTS_LIB", KFORGE_INPUTS_LIB_PATH, 0);
  harness.candidates =
      std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), backend, 0);
  try {
    harness.candidates->device_info();
  } catch (const Error& e) {
    harness.skip = std::string("no ") + backend + " device: " + e.what();
    return;
  }
  harness.task = std::make_unique<Task>(
      load_torch_task(worker::testing::source_root() + "/python/tests/problems/masked_pick.py"));
  worker::ProcessWorkerConfig reference;
  const std::vector<std::string> command = torch_worker_command();
  reference.worker_path = command.front();
  reference.worker_arguments.assign(command.begin() + 1, command.end());
  reference.environment = torch_environment(worker::scrubbed_environment());
  reference.backend = backend;
  reference.display_name = "torch reference worker";
  harness.reference = std::make_unique<worker::ProcessWorker>(reference);
  harness.evaluator = std::make_unique<evaluation::Evaluator>(
      *harness.candidates, *harness.reference, *harness.task, quick_policy());
  const std::string run_dir = worker::testing::scratch_dir() + "/provided-" + backend;
  fs::create_directories(run_dir);
  write_file_atomically(run_dir + "/reference.torch.json", derived_json(*harness.task).dump());
  compile::Artifact reference_artifact;
  reference_artifact.path = run_dir + "/reference.torch.json";
  reference_artifact.key = "masked_pick";
  harness.evaluator->prepare(reference_artifact);
}

Harness& harness_for(const std::string& backend) {
  static std::map<std::string, std::unique_ptr<Harness>> all;
  std::unique_ptr<Harness>& slot = all[backend];
  if (!slot) {
    slot = std::make_unique<Harness>();
    try {
      prepare(*slot, backend);
    } catch (const std::exception& e) {
      slot->error = "preparing masked_pick on " + backend + ": " + e.what();
    }
  }
  return *slot;
}

compile::Artifact build(const std::string& backend, const std::string& name,
                        const std::vector<std::string>& defines) {
  compile::ToolchainOptions options;
  options.cache_dir = worker::testing::scratch_dir() + "/provided-cache";
  options.include_dirs = kernel_include_dirs();
  options.cuda_arch = "sm_90";
  compile::ToolchainCompiler compiler(options, &backends::toolchain_for);
  const std::string extension = backends::get_backend(backend).source_extension;
  compile::CompileJob job;
  job.backend = backend;
  job.source = read_file(data_dir() + "/masked_pick" + extension);
  job.source_name = name + extension;
  for (const std::string& define : defines) job.defines[define] = "1";
  return compiler.compile(job);
}

#define KFORGE_HARNESS_OR_SKIP(backend)                       \
  Harness& harness = harness_for(backend);                    \
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;    \
  ASSERT_TRUE(harness.error.empty()) << harness.error

void reader_passes(Harness& harness, const std::string& backend) {
  const compile::Artifact artifact = build(backend, "masked_pick", {});
  ASSERT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
  const evaluation::CandidateEvaluation outcome = harness.evaluator->evaluate(artifact);
  EXPECT_EQ(outcome.verdict, Verdict::ok) << outcome.message;
  EXPECT_GT(outcome.gate.cases_checked, 3);
  EXPECT_FALSE(outcome.samples_ms.empty());
}

void wrong_kernels_fail(Harness& harness, const std::string& backend) {
  for (const char* wrong : {"KF_IGNORE_MASK", "KF_IGNORE_IDS"}) {
    const compile::Artifact artifact = build(backend, std::string("masked_pick_") + wrong, {wrong});
    ASSERT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
    const evaluation::CandidateEvaluation outcome = harness.evaluator->evaluate(artifact);
    EXPECT_EQ(outcome.verdict, Verdict::wrong_answer) << wrong << ": " << outcome.message;
  }
}

// Every file the reference wrote: the mask holds only 0 and 1 and both occur, the ids lie in
// [0, cols) at each workload (get_inputs() draws them from the rebound cols).
void files_hold_the_problems_values(Harness& harness) {
  const std::string dir = harness.evaluator->profile_inputs().provided_dir;
  ASSERT_FALSE(dir.empty());
  int masks = 0, id_files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string workload = name.substr(0, name.find('.'));
    const std::string bytes = read_file(entry.path());
    const Workload* bound = nullptr;
    for (const Workload& w : harness.task->workloads) {
      if (w.name == workload) bound = &w;
    }
    ASSERT_NE(bound, nullptr) << name;
    const std::vector<int64_t> shape = bind_shape(harness.task->signature.tensors[0], *bound);
    if (name.ends_with(".1.bin")) {
      ++masks;
      ASSERT_EQ(static_cast<int64_t>(bytes.size()), shape[0] * shape[1]) << name;
      bool zero = false, one = false;
      for (char c : bytes) {
        ASSERT_TRUE(c == 0 || c == 1) << name;
        (c == 0 ? zero : one) = true;
      }
      EXPECT_TRUE(zero && one) << name;
    } else if (name.ends_with(".2.bin")) {
      ++id_files;
      ASSERT_EQ(static_cast<int64_t>(bytes.size()), shape[0] * 8) << name;
      for (int64_t r = 0; r < shape[0]; ++r) {
        int64_t id = 0;
        std::memcpy(&id, bytes.data() + r * 8, 8);
        ASSERT_GE(id, 0) << name;
        ASSERT_LT(id, shape[1]) << name;
      }
    }
  }
  EXPECT_GT(masks, 3);
  EXPECT_EQ(masks, id_files);
}

TEST(ProvidedInputsTest, TheDerivationMarksTheMaskAndTheIdsProvidedAndGeneratesTheFloats) {
  KFORGE_HARNESS_OR_SKIP("cpu");
  const Task& task = *harness.task;
  ASSERT_EQ(task.signature.tensors.size(), 4u);
  EXPECT_FALSE(task.signature.tensors[0].provided);
  EXPECT_EQ(task.signature.tensors[0].dtype, DType::f32);
  EXPECT_TRUE(task.signature.tensors[1].provided);
  EXPECT_EQ(task.signature.tensors[1].dtype, DType::b8);
  EXPECT_TRUE(task.signature.tensors[2].provided);
  EXPECT_EQ(task.signature.tensors[2].dtype, DType::i64);
}

TEST(ProvidedInputsTest, AKernelThatReadsTheProvidedValuesPassesTheGateAndIsTimed) {
  KFORGE_HARNESS_OR_SKIP("cpu");
  reader_passes(harness, "cpu");
}

TEST(ProvidedInputsTest, KernelsThatAssumeOtherMaskOrIdValuesAreWrongAnswers) {
  KFORGE_HARNESS_OR_SKIP("cpu");
  wrong_kernels_fail(harness, "cpu");
}

TEST(ProvidedInputsTest, TheProvidedFilesHoldTheProblemsOwnValues) {
  KFORGE_HARNESS_OR_SKIP("cpu");
  files_hold_the_problems_values(harness);
}

TEST(GpuProvidedInputsTest, AKernelThatReadsTheProvidedValuesPassesTheGateAndIsTimed) {
  KFORGE_HARNESS_OR_SKIP("cuda");
  reader_passes(harness, "cuda");
}

TEST(GpuProvidedInputsTest, KernelsThatAssumeOtherMaskOrIdValuesAreWrongAnswers) {
  KFORGE_HARNESS_OR_SKIP("cuda");
  wrong_kernels_fail(harness, "cuda");
}

TEST(GpuProvidedInputsTest, TheProvidedFilesHoldTheProblemsOwnValues) {
  KFORGE_HARNESS_OR_SKIP("cuda");
  files_hold_the_problems_values(harness);
}

}  // namespace
}  // namespace kforge

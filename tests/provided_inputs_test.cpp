// Provided inputs end to end on the cpu backend: a PyTorch problem whose bool mask and class ids
// must come from its own get_inputs() (python/tests/problems/masked_pick.py) is derived into a task
// with those inputs marked provided; the torch reference worker writes them for every seed the
// evaluation uses, and kforge-worker hands them to native kernels. A kernel that reads the mask
// and the ids passes the gate and is timed; kernels that assume an all-true mask or id 0 (right
// on some other values, wrong on the problem's) fail it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
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

class ProvidedInputsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("KFORGE_PYTHON", KFORGE_TEST_PYTHON, 1);
    ::setenv("KFORGE_INPUTS_LIB", KFORGE_INPUTS_LIB_PATH, 1);
    task_ = std::make_unique<Task>(load_torch_task(worker::testing::source_root() +
                                                   "/python/tests/problems/masked_pick.py"));
    worker::ProcessWorkerConfig reference;
    const std::vector<std::string> command = torch_worker_command();
    reference.worker_path = command.front();
    reference.worker_arguments.assign(command.begin() + 1, command.end());
    reference.environment = torch_environment(worker::scrubbed_environment());
    reference.backend = "cpu";
    reference.display_name = "torch reference worker";
    reference_ = std::make_unique<worker::ProcessWorker>(reference);
    candidates_ =
        std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), "cpu", 0);
    evaluator_ = std::make_unique<evaluation::Evaluator>(*candidates_, *reference_, *task_,
                                                         quick_policy());
    run_dir_ = worker::testing::scratch_dir() + "/provided-run";
    fs::create_directories(run_dir_);
    write_file_atomically(run_dir_ + "/reference.torch.json", derived_json(*task_).dump());
    compile::Artifact reference_artifact;
    reference_artifact.path = run_dir_ + "/reference.torch.json";
    reference_artifact.key = "masked_pick";
    report_ = evaluator_->prepare(reference_artifact);
  }
  static void TearDownTestSuite() {
    evaluator_.reset();
    if (candidates_) candidates_->shutdown();
    if (reference_) reference_->shutdown();
    candidates_.reset();
    reference_.reset();
    task_.reset();
  }

  static compile::Artifact build(const std::string& name, std::vector<std::string> defines) {
    compile::ToolchainOptions options;
    options.cache_dir = worker::testing::scratch_dir() + "/provided-cache";
    options.include_dirs = kernel_include_dirs();
    compile::ToolchainCompiler compiler(options, &backends::toolchain_for);
    compile::CompileJob job;
    job.backend = "cpu";
    job.source = read_file(data_dir() + "/masked_pick.cpp");
    job.source_name = name + ".cpp";
    for (const std::string& define : defines) job.defines[define] = "1";
    return compiler.compile(job);
  }

  static std::unique_ptr<Task> task_;
  static std::unique_ptr<worker::ProcessWorker> reference_;
  static std::unique_ptr<worker::ProcessWorker> candidates_;
  static std::unique_ptr<evaluation::Evaluator> evaluator_;
  static std::string run_dir_;
  static evaluation::TaskReport report_;
};

std::unique_ptr<Task> ProvidedInputsTest::task_;
std::unique_ptr<worker::ProcessWorker> ProvidedInputsTest::reference_;
std::unique_ptr<worker::ProcessWorker> ProvidedInputsTest::candidates_;
std::unique_ptr<evaluation::Evaluator> ProvidedInputsTest::evaluator_;
std::string ProvidedInputsTest::run_dir_;
evaluation::TaskReport ProvidedInputsTest::report_;

TEST_F(ProvidedInputsTest, TheDerivationMarksTheMaskAndTheIdsProvidedAndGeneratesTheFloats) {
  ASSERT_EQ(task_->signature.tensors.size(), 4u);
  const TensorSpec& x = task_->signature.tensors[0];
  const TensorSpec& mask = task_->signature.tensors[1];
  const TensorSpec& ids = task_->signature.tensors[2];
  EXPECT_FALSE(x.provided);
  EXPECT_EQ(x.dtype, DType::f32);
  EXPECT_TRUE(mask.provided);
  EXPECT_EQ(mask.dtype, DType::b8);
  EXPECT_TRUE(ids.provided);
  EXPECT_EQ(ids.dtype, DType::i64);
}

TEST_F(ProvidedInputsTest, AKernelThatReadsTheProvidedValuesPassesTheGateAndIsTimed) {
  const compile::Artifact artifact = build("masked_pick", {});
  ASSERT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
  const evaluation::CandidateEvaluation outcome = evaluator_->evaluate(artifact);
  EXPECT_EQ(outcome.verdict, Verdict::ok) << outcome.message;
  EXPECT_GT(outcome.gate.cases_checked, 3);
  EXPECT_FALSE(outcome.samples_ms.empty());
}

TEST_F(ProvidedInputsTest, KernelsThatAssumeOtherMaskOrIdValuesAreWrongAnswers) {
  for (const char* wrong : {"KF_IGNORE_MASK", "KF_IGNORE_IDS"}) {
    const compile::Artifact artifact = build(std::string("masked_pick_") + wrong, {wrong});
    ASSERT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
    const evaluation::CandidateEvaluation outcome = evaluator_->evaluate(artifact);
    EXPECT_EQ(outcome.verdict, Verdict::wrong_answer) << wrong << ": " << outcome.message;
  }
}

TEST_F(ProvidedInputsTest, TheProvidedFilesHoldTheProblemsOwnValues) {
  // Every file the reference wrote: the mask holds only 0 and 1 and both occur, the ids lie in
  // [0, cols) at each workload (get_inputs() draws them from the rebound cols).
  const std::string dir = evaluator_->profile_inputs().provided_dir;
  ASSERT_FALSE(dir.empty());
  int masks = 0, id_files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string workload = name.substr(0, name.find('.'));
    const std::string bytes = read_file(entry.path());
    const Workload* bound = nullptr;
    for (const Workload& w : task_->workloads) {
      if (w.name == workload) bound = &w;
    }
    ASSERT_NE(bound, nullptr) << name;
    const std::vector<int64_t> shape = bind_shape(task_->signature.tensors[0], *bound);
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

}  // namespace
}  // namespace kforge

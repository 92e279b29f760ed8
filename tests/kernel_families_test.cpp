// The built-in kernel families (kernels/<backend>/<family>/) through the real evaluation plane:
// every variant of every family, at its default point and at every one-parameter change from it,
// is compiled by the ToolchainCompiler and must pass the gate (every gate workload, several seeds
// and input distributions, two calls, NaN-poisoned outputs) of its bundled task
// examples/<task>/task.toml, against that task's reference in a separate worker. A task names its
// family; the kernels are built for the element type of its first input (an fp16/bf16 task checks
// the variants whose family.toml `dtypes` list that type).
//
// cpu (suite KernelFamilies/CpuFamilyPoint, runs in CI): the timed workloads are dropped and the
// largest gate workload is timed instead, so the suite stays small on a CI machine.
// cuda (suite Gpu/CudaFamilyPoint, label gpu, skips itself without a device): the task as
// bundled, timed workloads included (the gate calls each once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "backends/backend.h"
#include "common/paths.h"
#include "compile/toolchain_compiler.h"
#include "core/epilogue.h"
#include "evaluation/evaluator.h"
#include "generation/kernel_family.h"
#include "generation/templates_generator.h"
#include "task/task_loader.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// Bundled tasks (examples/<name>/task.toml) whose family's built-in kernels are checked. A task
// is checked on each backend it has a reference for.
// The *_f16 / *_bf16 tasks (cuda only) check the fp16 and bf16 builds of their families.
const char* const kTasks[] = {"softmax",   "log_softmax",      "rmsnorm", "gemv",
                              "gemv_t",    "layernorm",        "rmsnorm_channels",
                              "relu",      "gelu",             "silu",
                              "silu_f16",  "gelu_bf16",        "rmsnorm_bf16",
                              "softmax_f16", "log_softmax_bf16", "layernorm_bf16",
                              "gemm_relu_div", "conv_transpose3d", "conv3d_bias_relu",
                              "attention"};

struct FamilyPoint {
  std::string backend, task, family, dtype;
  generation::TemplatePoint point;
};
void PrintTo(const FamilyPoint& p, std::ostream* out) {
  *out << p.backend << "/" << p.task << "/" << p.point.id();
}

std::string task_path(const std::string& task) {
  return worker::testing::source_root() + "/examples/" + task + "/task.toml";
}

std::string kernels_root() { return worker::testing::source_root() + "/kernels"; }

/// Default point of each variant that takes the task's element type plus every one-parameter
/// change from it, for every task with a reference on `backend`.
std::vector<FamilyPoint> points_for(const std::string& backend) {
  std::vector<FamilyPoint> points;
  for (const char* task_name : kTasks) {
    const Task task = load_task(task_path(task_name));
    if (!task.reference_paths.count(backend)) continue;
    const std::string dtype = to_string(element_dtype(task));
    const generation::KernelFamily loaded = generation::for_dtype(
        generation::load_family(kernels_root(), backend, task.family), dtype);
    for (const generation::TemplateVariant& variant : loaded.variants) {
      const generation::TemplatePoint base = generation::default_point(variant);
      points.push_back({backend, task_name, task.family, dtype, base});
      for (const generation::TemplateParam& param : variant.params) {
        for (size_t i = 1; i < param.values.size(); ++i) {
          generation::TemplatePoint changed = base;
          changed.params[param.name] = param.values[i];
          points.push_back({backend, task_name, task.family, dtype, changed});
        }
      }
    }
  }
  return points;
}

std::string point_name(const ::testing::TestParamInfo<FamilyPoint>& info) {
  std::string name = info.param.task + "_" + info.param.point.variant;
  for (const auto& [param, value] : info.param.point.params) name += "_" + param + value;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

compile::ToolchainCompiler& compiler() {
  static compile::ToolchainCompiler instance([] {
    compile::ToolchainOptions options;
    options.cache_dir = worker::testing::scratch_dir() + "/families-cache";
    options.include_dirs = kernel_include_dirs();
    options.cuda_arch = "sm_90";
    return options;
  }(), &backends::toolchain_for);
  return instance;
}

evaluation::EvaluationPolicy test_policy() {
  evaluation::EvaluationPolicy policy;
  policy.load_timeout_s = 60.0;
  policy.run_timeout_s = 60.0;
  policy.time_timeout_s = 60.0;
  policy.quick = {1, 3, 5, 0.05, 2.0};
  return policy;
}

/// The bundled task; on cpu its timed workloads are replaced by its largest gate workload.
Task task_for(const std::string& task_name, const std::string& backend) {
  Task task = load_task(task_path(task_name));
  if (backend != "cpu") return task;
  std::erase_if(task.workloads, [](const Workload& w) { return w.timed; });
  if (task.workloads.empty()) throw Error(task.source_path + ": no gate workload");
  auto largest = std::max_element(task.workloads.begin(), task.workloads.end(),
                                  [&task](const Workload& a, const Workload& b) {
                                    return min_bytes_moved(task.signature, a) <
                                           min_bytes_moved(task.signature, b);
                                  });
  largest->timed = true;
  return task;
}

// One prepared Evaluator per (task, backend), shared by all that task's points.
struct Harness {
  Task task;
  std::unique_ptr<worker::ProcessWorker> candidates;
  std::unique_ptr<worker::ProcessWorker> reference;
  std::unique_ptr<evaluation::Evaluator> evaluator;
  std::unique_ptr<generation::TemplatesGenerator> generator;
  std::string skip;   // no device for this backend
  std::string error;  // preparing failed
};

void prepare(Harness& harness, const std::string& task_name, const std::string& backend) {
  harness.task = task_for(task_name, backend);
  harness.reference =
      std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), backend, 0);
  try {
    harness.reference->device_info();
  } catch (const Error& e) {
    if (backend != "cuda") throw;
    harness.skip = std::string("no CUDA device: ") + e.what();
    return;
  }
  harness.candidates =
      std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), backend, 0);
  harness.evaluator = std::make_unique<evaluation::Evaluator>(
      *harness.candidates, *harness.reference, harness.task, test_policy());
  harness.generator = std::make_unique<generation::TemplatesGenerator>(
      generation::load_family(kernels_root(), backend, harness.task.family),
      to_string(element_dtype(harness.task)));
  harness.generator->set_task_defines(task_defines(harness.task));
  const std::string& reference_path = harness.task.reference_paths.at(backend);
  const compile::Artifact reference = compiler().compile(
      {backend, read_text(reference_path), fs::path(reference_path).filename().string(), {}});
  if (reference.verdict != Verdict::ok) throw Error(reference_path + ": " + reference.log);
  harness.evaluator->prepare(reference);
  if (std::optional<compile::Artifact> model = evaluation::fp32_model_artifact(
          harness.task, backend,
          [](const compile::CompileJob& job) { return compiler().compile(job); }, "")) {
    harness.evaluator->load_fp32_model(*model);
  }
}

Harness& harness_for(const std::string& task_name, const std::string& backend) {
  static std::map<std::string, std::unique_ptr<Harness>> all;
  std::unique_ptr<Harness>& slot = all[task_name + "/" + backend];
  if (!slot) {
    slot = std::make_unique<Harness>();
    try {
      prepare(*slot, task_name, backend);
    } catch (const std::exception& e) {
      slot->error = "preparing " + task_name + " (" + backend + "): " + e.what();
    }
  }
  return *slot;
}

void check_point(const FamilyPoint& p) {
  Harness& harness = harness_for(p.task, p.backend);
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
  ASSERT_TRUE(harness.error.empty()) << harness.error;
  const generation::Proposal proposal = harness.generator->make_proposal(p.point);
  const compile::Artifact artifact = compiler().compile(proposal.job);
  ASSERT_EQ(artifact.verdict, Verdict::ok) << proposal.id << ":\n" << artifact.log;
  const evaluation::CandidateEvaluation evaluation = harness.evaluator->evaluate(artifact);
  EXPECT_EQ(to_string(evaluation.verdict), "ok") << proposal.id << ": " << evaluation.message;
  EXPECT_GT(evaluation.gate.cases_checked, 0) << proposal.id;
}

class CpuFamilyPoint : public ::testing::TestWithParam<FamilyPoint> {};
class CudaFamilyPoint : public ::testing::TestWithParam<FamilyPoint> {};

// Full names: KernelFamilies/CpuFamilyPoint.PassesTheGate/log_softmax_row_simd_ONLINE1_PARALLEL1
// (CI) and Gpu/CudaFamilyPoint.PassesTheGate/... (label gpu).
TEST_P(CpuFamilyPoint, PassesTheGate) { check_point(GetParam()); }
TEST_P(CudaFamilyPoint, PassesTheGate) { check_point(GetParam()); }
INSTANTIATE_TEST_SUITE_P(KernelFamilies, CpuFamilyPoint, ::testing::ValuesIn(points_for("cpu")),
                         point_name);
INSTANTIATE_TEST_SUITE_P(Gpu, CudaFamilyPoint, ::testing::ValuesIn(points_for("cuda")),
                         point_name);

// Every fp32 task listed here has both backends' references and kernels, and every task has a
// gate workload with a size that is not a multiple of 32 (the tails the kernels must handle).
TEST(KernelFamiliesList, EveryTaskHasItsBackendsAndATail) {
  for (const char* task_name : kTasks) {
    const Task task = load_task(task_path(task_name));
    EXPECT_TRUE(task.reference_paths.count("cuda")) << task_name;
    if (element_dtype(task) == DType::f32) {
      EXPECT_TRUE(task.reference_paths.count("cpu")) << task_name;
    }
    for (const auto& [backend, path] : task.reference_paths) {
      EXPECT_NO_THROW(generation::for_dtype(
          generation::load_family(kernels_root(), backend, task.family),
          to_string(element_dtype(task))))
          << task_name << " on " << backend;
    }
    bool has_tail = false;
    for (const Workload& w : task.workloads) {
      for (const auto& [dim, value] : w.dims) has_tail = has_tail || (!w.timed && value % 32 != 0);
    }
    EXPECT_TRUE(has_tail) << task_name;
  }
}

}  // namespace
}  // namespace kforge

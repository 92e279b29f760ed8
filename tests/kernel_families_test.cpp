// The built-in kernel families (kernels/<backend>/<family>/) through the real evaluation plane:
// every variant of every family, at its default point and at every one-parameter change from it,
// is compiled by the ToolchainCompiler and must pass the gate (every gate workload, several seeds
// and input distributions, two calls, NaN-poisoned outputs) of its bundled task
// examples/<family>/task.toml, against that task's reference in a separate worker.
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
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/paths.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "generation/kernel_family.h"
#include "generation/templates_generator.h"
#include "task/task_loader.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// Families with a bundled task of the same name under examples/.
const char* const kFamilies[] = {"softmax",   "log_softmax",      "rmsnorm", "gemv", "gemv_t",
                                 "layernorm", "rmsnorm_channels", "relu",    "gelu"};

struct FamilyPoint {
  std::string backend, family;
  generation::TemplatePoint point;
};
void PrintTo(const FamilyPoint& p, std::ostream* out) {
  *out << p.backend << "/" << p.family << "/" << p.point.id();
}

std::string kernels_root() { return worker::testing::source_root() + "/kernels"; }

/// Default point of each variant plus every one-parameter change from it.
std::vector<FamilyPoint> points_for(const std::string& backend) {
  std::vector<FamilyPoint> points;
  for (const char* family : kFamilies) {
    const generation::KernelFamily loaded = generation::load_family(kernels_root(), backend, family);
    for (const generation::TemplateVariant& variant : loaded.variants) {
      const generation::TemplatePoint base = generation::default_point(variant);
      points.push_back({backend, family, base});
      for (const generation::TemplateParam& param : variant.params) {
        for (size_t i = 1; i < param.values.size(); ++i) {
          generation::TemplatePoint changed = base;
          changed.params[param.name] = param.values[i];
          points.push_back({backend, family, changed});
        }
      }
    }
  }
  return points;
}

std::string point_name(const ::testing::TestParamInfo<FamilyPoint>& info) {
  std::string name = info.param.family + "_" + info.param.point.variant;
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
  }());
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
Task task_for(const std::string& family, const std::string& backend) {
  Task task = load_task(worker::testing::source_root() + "/examples/" + family + "/task.toml");
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

// One prepared Evaluator per (family, backend), shared by all that family's points.
struct Harness {
  Task task;
  std::unique_ptr<worker::ProcessWorker> candidates;
  std::unique_ptr<worker::ProcessWorker> reference;
  std::unique_ptr<evaluation::Evaluator> evaluator;
  std::unique_ptr<generation::TemplatesGenerator> generator;
  std::string skip;   // no device for this backend
  std::string error;  // preparing failed
};

void prepare(Harness& harness, const std::string& family, const std::string& backend) {
  harness.task = task_for(family, backend);
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
      generation::load_family(kernels_root(), backend, family));
  const std::string& reference_path = harness.task.reference_paths.at(backend);
  const compile::Artifact reference = compiler().compile(
      {backend, read_text(reference_path), fs::path(reference_path).filename().string(), {}});
  if (reference.verdict != Verdict::ok) throw Error(reference_path + ": " + reference.log);
  harness.evaluator->prepare(reference);
}

Harness& harness_for(const std::string& family, const std::string& backend) {
  static std::map<std::string, std::unique_ptr<Harness>> all;
  std::unique_ptr<Harness>& slot = all[family + "/" + backend];
  if (!slot) {
    slot = std::make_unique<Harness>();
    try {
      prepare(*slot, family, backend);
    } catch (const std::exception& e) {
      slot->error = "preparing " + family + " (" + backend + "): " + e.what();
    }
  }
  return *slot;
}

void check_point(const FamilyPoint& p) {
  Harness& harness = harness_for(p.family, p.backend);
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

// Every family listed here has its task and both backends' kernels, and every task has a
// gate workload with a size that is not a multiple of 32 (the tails the kernels must handle).
TEST(KernelFamiliesList, EveryFamilyHasATaskAndBothBackends) {
  for (const char* family : kFamilies) {
    const Task task = load_task(worker::testing::source_root() + "/examples/" + family +
                                "/task.toml");
    EXPECT_EQ(task.family, family);
    EXPECT_TRUE(task.reference_paths.count("cpu")) << family;
    EXPECT_TRUE(task.reference_paths.count("cuda")) << family;
    bool has_tail = false;
    for (const Workload& w : task.workloads) {
      for (const auto& [dim, value] : w.dims) has_tail = has_tail || (!w.timed && value % 32 != 0);
    }
    EXPECT_TRUE(has_tail) << family;
  }
}

}  // namespace
}  // namespace kforge

// Python candidates (KernelBench-format ModelNew sources, issue 19) through the real evaluation
// plane: the corpus of tests/adversarial/torch/ (manifest.toml) evaluated by the Evaluator as
// the search evaluates native kernels: the static screen, the compile step (staged by content),
// rung 0 (the gate) and rung 1 (quick timing with checked calls), with the reference in the
// torch reference worker and the candidates routed to the Python candidate worker
// (worker/candidate_router.h). Each entry must get its `expect` verdict, with the manifest's
// `reason` in the message where the dynamic checks are what catch it. cpu entries here; the
// entries marked `cuda` run in GpuPythonCandidatesTest on a machine with a GPU (the H200).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <toml++/toml.h>

#include "backends/backend.h"
#include "common/files.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "task/torch_task.h"
#include "worker/candidate_router.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

std::string corpus_dir() { return worker::testing::source_root() + "/tests/adversarial/torch"; }

evaluation::EvaluationPolicy quick_policy() {
  evaluation::EvaluationPolicy policy;
  policy.run_timeout_s = 120.0;
  policy.time_timeout_s = 120.0;
  policy.quick = {1, 5, 10, 0.05, 2.0};
  return policy;
}

worker::ProcessWorkerConfig python_worker(const std::vector<std::string>& command,
                                          const std::string& backend, const std::string& name) {
  worker::ProcessWorkerConfig config;
  config.worker_path = command.front();
  config.worker_arguments.assign(command.begin() + 1, command.end());
  config.environment = torch_environment(worker::scrubbed_environment());
  config.backend = backend;
  config.display_name = name;
  return config;
}

// The corpus task on one backend: the torch reference worker, kforge-worker and the Python
// candidate worker behind one router, an Evaluator prepared on them.
struct Harness {
  std::unique_ptr<Task> task;
  std::unique_ptr<worker::ProcessWorker> reference;
  std::unique_ptr<worker::ProcessWorker> native;
  std::unique_ptr<worker::ProcessWorker> python;
  std::unique_ptr<worker::CandidateRouter> candidates;
  std::unique_ptr<evaluation::Evaluator> evaluator;
  std::string skip;
  std::string error;
};

void prepare(Harness& harness, const std::string& backend) {
  if (backends::find_backend(backend) == nullptr) {
    harness.skip = "the " + backend + " backend is not in this build";
    return;
  }
  ::setenv("KFORGE_INPUTS_LIB", KFORGE_INPUTS_LIB_PATH, 0);
  harness.native = std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(),
                                                           backend, 0);
  try {
    harness.native->device_info();
  } catch (const Error& e) {
    harness.skip = std::string("no ") + backend + " device: " + e.what();
    return;
  }
  harness.task = std::make_unique<Task>(load_torch_task(corpus_dir() + "/problem.py"));
  harness.reference = std::make_unique<worker::ProcessWorker>(
      python_worker(torch_worker_command(), backend, "torch reference worker"));
  harness.python = std::make_unique<worker::ProcessWorker>(
      python_worker(torch_candidate_worker_command(), backend, "python candidate worker"));
  harness.candidates = std::make_unique<worker::CandidateRouter>(*harness.native,
                                                                 *harness.python);
  harness.evaluator = std::make_unique<evaluation::Evaluator>(
      *harness.candidates, *harness.reference, *harness.task, quick_policy());
  const std::string run_dir = worker::testing::scratch_dir() + "/python-candidates-" + backend;
  fs::create_directories(run_dir);
  write_file_atomically(run_dir + "/reference.torch.json", derived_json(*harness.task).dump());
  compile::Artifact reference_artifact;
  reference_artifact.path = run_dir + "/reference.torch.json";
  reference_artifact.key = "python_candidates";
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
      slot->error = "preparing the corpus task on " + backend + ": " + e.what();
    }
  }
  return *slot;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// What the plane says of one corpus file: the screen's verdict, or the compile step's and then
// rungs 0 and 1.
std::pair<Verdict, std::string> evaluate(Harness& harness, const std::string& backend,
                                         const std::string& file) {
  const std::string source = read_file(corpus_dir() + "/" + file);
  const std::string name = fs::path(file).filename().string();
  if (std::string violations = harness.evaluator->screen(source, name, backend);
      !violations.empty()) {
    return {Verdict::rejected_by_policy, violations};
  }
  compile::ToolchainOptions options;
  options.cache_dir = worker::testing::scratch_dir() + "/python-candidates-cache";
  compile::ToolchainCompiler compiler(options, &backends::toolchain_for);
  compile::CompileJob job{backend, source, name, {}, ""};
  const compile::Artifact artifact = compiler.compile(job);
  if (artifact.verdict != Verdict::ok) return {artifact.verdict, artifact.log};
  const evaluation::CandidateEvaluation outcome = harness.evaluator->evaluate(artifact);
  return {outcome.verdict, outcome.message};
}

void corpus_gets_its_verdicts(const std::string& backend) {
  Harness& harness = harness_for(backend);
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
  ASSERT_TRUE(harness.error.empty()) << harness.error;
  const toml::table root = toml::parse_file(corpus_dir() + "/manifest.toml");
  int evaluated = 0;
  for (const toml::node& node : *root["candidate"].as_array()) {
    const toml::table& entry = *node.as_table();
    if (entry["cuda"].value_or(false) != (backend == "cuda")) continue;
    const std::string file = entry["file"].value_or(std::string());
    SCOPED_TRACE(file);
    const auto [verdict, message] = evaluate(harness, backend, file);
    EXPECT_EQ(to_string(verdict), entry["expect"].value_or(std::string())) << message;
    if (!entry.contains("dynamic")) {
      EXPECT_NE(lower(message).find(entry["reason"].value_or(std::string())), std::string::npos)
          << message;
    }
    ++evaluated;
  }
  EXPECT_GE(evaluated, 3);
}

TEST(PythonCandidatesTest, CorpusGetsItsVerdictsThroughTheEvaluator) {
  corpus_gets_its_verdicts("cpu");
}

TEST(GpuPythonCandidatesTest, CorpusGetsItsVerdictsThroughTheEvaluator) {
  corpus_gets_its_verdicts("cuda");
}

}  // namespace
}  // namespace kforge

// The adversarial corpus (tests/adversarial/manifest.toml) through the real evaluation plane:
// static policy, ToolchainCompiler, and the Evaluator's gate and quick timing with a real
// kforge-worker for candidates and another for the reference. Each manifest entry must get its
// labelled verdict. cpu entries run in CI (suite Adversarial/...); cuda entries are labelled gpu
// (suite Gpu/...) and skip themselves when no CUDA device answers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <toml++/toml.h>

#include "common/error.h"
#include "backends/backend.h"
#include "common/paths.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "task/task_loader.h"
#include "support/rerun.h"
#include "worker/sandbox.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

struct Entry {
  std::string task, backend, file, expect, reason, kind;
  bool secret_probe = false;  // looks for the secret AdversarialSecretProbes plants
};
// gtest prints a failing parameter with this instead of its bytes.
void PrintTo(const Entry& entry, std::ostream* out) { *out << entry.file; }

std::string corpus_dir() { return worker::testing::source_root() + "/tests/adversarial"; }

struct Manifest {
  std::vector<Entry> entries;
  std::string error;  // why the manifest could not be read, else empty
};

// Read at static-init time (the parameter generators need it), so a parse error is kept and
// reported by a test instead of thrown.
const Manifest& manifest() {
  static const Manifest loaded = [] {
    Manifest result;
    try {
      const toml::table root = toml::parse_file(corpus_dir() + "/manifest.toml");
      const toml::array* candidates = root["candidate"].as_array();
      if (candidates == nullptr) throw Error("no [[candidate]] entries");
      for (const toml::node& node : *candidates) {
        const toml::table& table = *node.as_table();
        auto text = [&table](const char* key) { return table[key].value_or(std::string()); };
        result.entries.push_back({text("task"), text("backend"), text("file"), text("expect"),
                                  text("reason"), text("kind"),
                                  table["secret_probe"].value_or(false)});
      }
    } catch (const std::exception& e) {
      result.error = std::string("tests/adversarial/manifest.toml: ") + e.what();
    }
    return result;
  }();
  return loaded;
}

std::vector<Entry> entries_for(const std::string& backend) {
  std::vector<Entry> selected;
  for (const Entry& entry : manifest().entries) {
    if (entry.backend == backend) selected.push_back(entry);
  }
  return selected;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Short deadlines: `hangs` must time out in seconds, not the production minutes.
evaluation::EvaluationPolicy test_policy() {
  evaluation::EvaluationPolicy policy;
  policy.load_timeout_s = 30.0;
  policy.run_timeout_s = 10.0;
  policy.time_timeout_s = 30.0;
  policy.quick = {1, 5, 10, 0.05, 2.0};
  return policy;
}

compile::ToolchainCompiler& compiler() {
  static compile::ToolchainCompiler instance([] {
    compile::ToolchainOptions options;
    options.cache_dir = worker::testing::scratch_dir() + "/adversarial-cache";
    options.include_dirs = kernel_include_dirs();
    options.cuda_arch = "sm_90";
    return options;
  }(), &backends::toolchain_for);
  return instance;
}

// One Evaluator per (task, backend), prepared once and shared by all that task's candidates.
struct Harness {
  Task task;
  std::unique_ptr<worker::ProcessWorker> candidates;
  std::unique_ptr<worker::ProcessWorker> reference;
  std::unique_ptr<evaluation::Evaluator> evaluator;
  evaluation::TaskReport report;
  std::string skip;   // no device for this backend: every entry skips with this
  std::string error;  // preparing failed: every entry fails with this
};

std::map<std::string, std::unique_ptr<Harness>>& harnesses() {
  static std::map<std::string, std::unique_ptr<Harness>> all;
  return all;
}

// `sandbox` wraps the candidates' worker (the reference's runs bare, as it runs no candidate).
void prepare(Harness& harness, const std::string& task_name, const std::string& backend,
             const evaluation::EvaluationPolicy& policy = test_policy(),
             const std::function<void(Task&)>& adjust = {}, const worker::Sandbox& sandbox = {}) {
  harness.task = load_task(corpus_dir() + "/" + task_name + "/task.toml");
  if (adjust) adjust(harness.task);
  harness.reference = std::make_unique<worker::ProcessWorker>(
      worker::testing::worker_path(), backend, 0);
  try {
    harness.reference->device_info();
  } catch (const Error& e) {
    if (backend != "cuda") throw;
    harness.skip = std::string("no CUDA device: ") + e.what();
    return;
  }
  worker::ProcessWorkerConfig config;
  config.worker_path = worker::testing::worker_path();
  config.backend = backend;
  // Small enough that unbounded_allocation is killed long before the host runs short.
  config.memory_limit_bytes = int64_t{1} << 30;  // the worker itself needs ~0.3 GiB (cache flush)
  config.sandbox = sandbox;
  harness.candidates = std::make_unique<worker::ProcessWorker>(config);
  harness.evaluator = std::make_unique<evaluation::Evaluator>(
      *harness.candidates, *harness.reference, harness.task, policy);
  const std::string& reference_path = harness.task.reference_paths.at(backend);
  compile::Artifact reference = compiler().compile(
      {backend, read_text(reference_path), fs::path(reference_path).filename().string(), {}});
  if (reference.verdict != Verdict::ok) throw Error(reference_path + ": " + reference.log);
  harness.report = harness.evaluator->prepare(reference);
  if (std::optional<compile::Artifact> model = evaluation::fp32_model_artifact(
          harness.task, backend,
          [](const compile::CompileJob& job) { return compiler().compile(job); }, "")) {
    harness.evaluator->load_fp32_model(*model);
  }
}

Harness& harness_for(const std::string& task_name, const std::string& backend) {
  std::unique_ptr<Harness>& slot = harnesses()[task_name + "/" + backend];
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

struct Outcome {
  Verdict verdict = Verdict::ok;
  std::string message;
};

// The plane's ladder for one candidate: screen, compile, then gate and quick timing.
Outcome judge(Harness& harness, const Entry& entry) {
  const std::string name = fs::path(entry.file).filename().string();
  const std::string source = read_text(corpus_dir() + "/" + entry.file);
  if (std::string violations = harness.evaluator->screen(source, name, entry.backend);
      !violations.empty()) {
    return {Verdict::rejected_by_policy, violations};
  }
  const compile::Artifact artifact = compiler().compile({entry.backend, source, name, {}, ""});
  if (artifact.verdict != Verdict::ok) return {artifact.verdict, artifact.log};
  const evaluation::CandidateEvaluation evaluation = harness.evaluator->evaluate(artifact);
  // A candidate that passes may still be flagged: its message is then the quick rung's warning.
  return {evaluation.verdict, evaluation.verdict == Verdict::ok ? evaluation.quick.warning
                                                                : evaluation.message};
}

// Every judged entry's row, printed together at the end so the log shows the whole table.
std::vector<std::string>& table_rows() {
  static std::vector<std::string> rows;
  return rows;
}

std::string table_row(const Entry& entry, const std::string& got, std::string message) {
  for (char& c : message) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  char row[512];
  std::snprintf(row, sizeof row, "%-22s %-5s %-8s expected %-19s got %-19s %.160s",
                entry.kind.c_str(), entry.backend.c_str(), entry.task.c_str(),
                entry.expect.c_str(), got.c_str(), message.c_str());
  return row;
}

// Shuts the workers down before exit and prints the table.
class CorpusEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    harnesses().clear();
    if (table_rows().empty()) return;
    std::printf("\nadversarial corpus, %zu entries judged:\n", table_rows().size());
    for (const std::string& row : table_rows()) std::printf("  %s\n", row.c_str());
  }
};
[[maybe_unused]] ::testing::Environment* const corpus_environment =
    ::testing::AddGlobalTestEnvironment(new CorpusEnvironment);

void check_entry(const Entry& entry) {
  Harness& harness = harness_for(entry.task, entry.backend);
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
  ASSERT_TRUE(harness.error.empty()) << harness.error;
  const Outcome outcome = judge(harness, entry);
  const std::string got = to_string(outcome.verdict);
  const std::string row = table_row(entry, got, outcome.message);
  table_rows().push_back(row);
  std::printf("%s\n", row.c_str());
  if (entry.backend == "cpu" && entry.kind == "racy" && std::thread::hardware_concurrency() < 2) {
    GTEST_SKIP() << "racy (cpu) only misbehaves with >= 2 hardware threads; this machine has "
                 << std::thread::hardware_concurrency() << ", so its verdict (" << got
                 << ") is not asserted";
  }
  EXPECT_EQ(got, entry.expect) << entry.file << ": " << outcome.message;
  if (!entry.reason.empty()) {
    EXPECT_NE(lowercase(outcome.message).find(entry.reason), std::string::npos)
        << entry.file << ": message lacks '" << entry.reason << "': " << outcome.message;
  }
}

std::string entry_name(const ::testing::TestParamInfo<Entry>& info) {
  std::string name = info.param.task + "_" + info.param.kind;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

class CpuCorpus : public ::testing::TestWithParam<Entry> {};
class AdversarialCorpus : public ::testing::TestWithParam<Entry> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CpuCorpus);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AdversarialCorpus);

// Full names: Adversarial/CpuCorpus.GetsItsLabelledVerdict/softmax_zeros (CI) and
// Gpu/AdversarialCorpus.GetsItsLabelledVerdict/softmax_zeros (label gpu).
TEST_P(CpuCorpus, GetsItsLabelledVerdict) { check_entry(GetParam()); }
TEST_P(AdversarialCorpus, GetsItsLabelledVerdict) { check_entry(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Adversarial, CpuCorpus, ::testing::ValuesIn(entries_for("cpu")),
                         entry_name);
INSTANTIATE_TEST_SUITE_P(Gpu, AdversarialCorpus, ::testing::ValuesIn(entries_for("cuda")),
                         entry_name);

// The parameterized tests only check what the manifest says; this checks that the manifest says
// the right things: it parses, every file exists, every verdict is a kforge verdict, every
// honest candidate is labelled ok (so it must pass), and the huge-output scale kernel is there.
TEST(AdversarialManifest, IsCompleteAndLabelsEveryHonestCandidateOk) {
  ASSERT_TRUE(manifest().error.empty()) << manifest().error;
  ASSERT_GE(manifest().entries.size(), 40u);
  int honest = 0;
  bool scale_large[2] = {false, false};
  for (const Entry& entry : manifest().entries) {
    EXPECT_TRUE(fs::exists(corpus_dir() + "/" + entry.file)) << entry.file;
    EXPECT_TRUE(entry.backend == "cpu" || entry.backend == "cuda") << entry.file;
    EXPECT_NO_THROW(parse_verdict(entry.expect)) << entry.file;
    EXPECT_EQ(entry.reason, lowercase(entry.reason)) << entry.file << ": reason must be lowercase";
    if (entry.kind.starts_with("honest")) {
      ++honest;
      EXPECT_EQ(entry.expect, "ok") << entry.file << ": an honest candidate must pass";
    }
    if (entry.task == "scale" && entry.kind == "honest_large") {
      scale_large[entry.backend == "cuda"] = true;
    }
  }
  EXPECT_GE(honest, 6);
  EXPECT_TRUE(scale_large[0] && scale_large[1]) << "scale honest_large (cpu and cuda) missing";
}

// The softmax task's gate sizes must tell zeros, a constant and a copy of x from softmax.
void expect_self_test_clean(const std::string& backend) {
  Harness& harness = harness_for("softmax", backend);
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
  ASSERT_TRUE(harness.error.empty()) << harness.error;
  const evaluation::SelfTestReport& self_test = harness.report.self_test;
  EXPECT_TRUE(self_test.reference_passes);
  EXPECT_FALSE(self_test.cases.empty());
  for (const std::string& weakness : self_test.weaknesses) ADD_FAILURE() << weakness;
}

TEST(AdversarialTaskSelfTest, SoftmaxHasNoWeaknesses) { expect_self_test_clean("cpu"); }
TEST(GpuAdversarialTaskSelfTest, SoftmaxHasNoWeaknesses) { expect_self_test_clean("cuda"); }

// The secret probes (manifest: secret_probe = true) look through /proc for KFORGE_PLANTED_SECRET.
// The test reruns itself with that variable exported, so that it is in this process's initial
// environment block (what /proc/<pid>/environ shows) and on its stack, as an API key exported in
// kforge's environment would be. There each probe must get its labelled verdict (ok: it found
// nothing) from a candidate worker in bubblewrap and in kforge's unshare fallback (bubblewrap
// turned off); and, the control that shows the probes work, each run bare (no sandbox) must
// find the secret and answer wrong (parent_memory_secret only as root, which may read any
// process's memory).
void check_secret_probes(const std::string& backend) {
  constexpr const char* kSecret = "KFORGE_PLANTED_SECRET=sk-planted-7c41e0";
  if (!testing::in_rerun()) {
    const testing::RerunResult child = testing::rerun_this_test({kSecret}, 540.0);
    std::printf("%s\n", child.output.c_str());
    EXPECT_TRUE(child.passed) << "the rerun with the secret planted failed (output above)";
    return;
  }
  std::vector<Entry> probes;
  for (const Entry& entry : entries_for(backend)) {
    if (entry.secret_probe) probes.push_back(entry);
  }
  ASSERT_FALSE(probes.empty()) << "no secret_probe entries for " << backend;
  int sandboxes = 0;
  for (const std::string mechanism : {"bubblewrap", "unshare"}) {
    const worker::Sandbox sandbox =
        worker::detect_sandbox({mechanism == "bubblewrap", mechanism == "unshare"});
    if (!sandbox.available) {
      std::printf("%s: not available here, not checked: %s\n", mechanism.c_str(),
                  sandbox.note.c_str());
      continue;
    }
    Harness harness;
    try {
      prepare(harness, probes.front().task, backend, test_policy(), {}, sandbox);
    } catch (const std::exception& e) {
      FAIL() << "preparing " << probes.front().task << " in " << mechanism << ": " << e.what();
    }
    if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
    ++sandboxes;
    for (const Entry& entry : probes) {
      const Outcome outcome = judge(harness, entry);
      std::printf("%s\n", table_row(entry, to_string(outcome.verdict) + " (" + mechanism + ")",
                                     outcome.message).c_str());
      EXPECT_EQ(to_string(outcome.verdict), entry.expect)
          << entry.file << " in " << mechanism << ": " << outcome.message;
    }
  }
  Harness bare;
  prepare(bare, probes.front().task, backend);
  for (const Entry& entry : probes) {
    const Outcome outcome = judge(bare, entry);
    std::printf("%s\n", table_row(entry, to_string(outcome.verdict) + " (no sandbox)",
                                   outcome.message).c_str());
    // Another process's mem needs ptrace rights over it (root, or Yama's ptrace_scope 0).
    if (entry.kind == "parent_memory_secret" && ::geteuid() != 0) continue;
    EXPECT_EQ(outcome.verdict, Verdict::wrong_answer)
        << entry.file << " without a sandbox should have found the planted secret: "
        << outcome.message;
  }
  if (sandboxes == 0) GTEST_SKIP() << "no sandbox with a PID namespace works here (notes above)";
}

TEST(AdversarialSecretProbes, FindNothingInBubblewrapNorInTheUnshareFallback) {
  check_secret_probes("cpu");
}
TEST(GpuAdversarialSecretProbes, FindNothingInBubblewrapNorInTheUnshareFallback) {
  check_secret_probes("cuda");
}

// mean_loss lists only uniform and normal inputs, on which a subsample's or half the rows' mean is
// within its 1% tolerance: the self-test's every_16th and half_rows probes pass there, and fail
// on the gate's own pareto and spike cases, so the task is not weak.
void expect_mean_loss_probes_caught(const std::string& backend) {
  Harness& harness = harness_for("mean_loss", backend);
  if (!harness.skip.empty()) GTEST_SKIP() << harness.skip;
  ASSERT_TRUE(harness.error.empty()) << harness.error;
  const evaluation::SelfTestReport& self_test = harness.report.self_test;
  for (const std::string& weakness : self_test.weaknesses) ADD_FAILURE() << weakness;
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  for (const std::string remap : {"every_16th", "half_rows"}) {
    bool passed_on_listed = false, failed_on_adversarial = false;
    for (const evaluation::SelfTestCase& c : self_test.cases) {
      if (c.name != "reference on " + remap + " inputs") continue;
      const bool listed = has(c.label, "(uniform inputs") || has(c.label, "(normal inputs");
      passed_on_listed = passed_on_listed || (listed && c.passed);
      failed_on_adversarial = failed_on_adversarial || (!listed && !c.passed);
    }
    EXPECT_TRUE(passed_on_listed) << remap << ": the listed distributions alone should be weak";
    EXPECT_TRUE(failed_on_adversarial) << remap << ": pareto/spike should tell it apart";
  }
}

TEST(AdversarialTaskSelfTest, MeanLossProbesFailOnTheGatesAdversarialCases) {
  expect_mean_loss_probes_caught("cpu");
}
TEST(GpuAdversarialTaskSelfTest, MeanLossProbesFailOnTheGatesAdversarialCases) {
  expect_mean_loss_probes_caught("cuda");
}

// Without the gate's adversarial distributions the same task is weak, and says why.
TEST(AdversarialTaskSelfTest, MeanLossWithoutAdversarialDistributionsIsReportedWeak) {
  evaluation::EvaluationPolicy policy = test_policy();
  policy.gate.adversarial_distributions.clear();
  Harness harness;
  prepare(harness, "mean_loss", "cpu", policy);
  std::string warnings;
  for (const std::string& warning : harness.report.warnings) warnings += warning + "\n";
  EXPECT_NE(warnings.find("weak task: the reference on inputs remapped every_16th passes"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("weak task: the reference on inputs remapped half_rows passes"),
            std::string::npos)
      << warnings;
}

// The gate's own distributions are dropped, with a warning, where the reference is not finite:
// scale with alpha = 1e36 overflows f32 where |x| > 340, which pareto inputs (P(|x| > t) = 1/(2t))
// reach a few times in the 4097-element workload; uniform and normal inputs stay finite.
TEST(AdversarialTaskSelfTest, AnAdversarialDistributionWithNonFiniteReferenceIsDropped) {
  Harness harness;
  prepare(harness, "scale", "cpu", test_policy(),
          [](Task& task) { task.signature.scalars.at(0).value = 1e36; });
  std::string warnings;
  for (const std::string& warning : harness.report.warnings) warnings += warning + "\n";
  EXPECT_NE(warnings.find("input distribution 'pareto' left out of the gate: the reference's "
                          "output 'y' is not finite"),
            std::string::npos)
      << warnings;
  bool uniform_checked = false;
  for (const evaluation::SelfTestCase& c : harness.report.self_test.cases) {
    EXPECT_EQ(c.label.find("pareto"), std::string::npos) << c.label;
    uniform_checked = uniform_checked || c.label.find("(uniform inputs") != std::string::npos;
  }
  EXPECT_TRUE(uniform_checked);
}

}  // namespace
}  // namespace kforge

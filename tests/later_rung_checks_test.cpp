// Checked calls beyond the quick rung (issue 25 part 1): a kernel that is honest while it is
// gated and quickly timed, then stops computing, must be found wrong_answer by the acceptance
// comparison, rung 2 and the final rung - each of which re-checks calls of its own - and an
// honest kernel must pass them all. Real workers (cpu), the softmax corpus task.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/paths.h"
#include "backends/backend.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "task/task_loader.h"
#include "worker/test_kernels.h"
#include "worker/worker_client.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

std::string corpus_file(const std::string& relative) {
  std::ifstream in(worker::testing::source_root() + "/tests/adversarial/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The honest softmax with a counter: correct for its first `honest_calls` calls at the timed
// shape (the gate's and the quick rung's), then it returns without writing y.
std::string lazy_after(int honest_calls) {
  std::string source = corpus_file("softmax/cpu/honest_simple.cpp");
  const std::string loop = "\n  for (int64_t r = 0; r < rows; ++r) {";
  const size_t at = source.find(loop);
  if (at == std::string::npos) return "";
  source.insert(at, "\n  static int64_t large_calls = 0;\n  if (rows * cols >= 65536 && ++large_calls > " +
                        std::to_string(honest_calls) + ") return 0;");
  return source;
}

class LaterRungChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    task_ = load_task(worker::testing::source_root() + "/tests/adversarial/softmax/task.toml");
    compile::ToolchainOptions options;
    options.cache_dir = worker::testing::scratch_dir() + "/later-rung-cache";
    options.include_dirs = kernel_include_dirs();
    compiler_ = backends::make_compiler(options);
    candidates_ = std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), "cpu", 0);
    reference_ = std::make_unique<worker::ProcessWorker>(worker::testing::worker_path(), "cpu", 0);
    evaluation::EvaluationPolicy policy;
    policy.input_sets = 2;                // the call counts below assume two sets
    policy.quick = {1, 5, 5, 1.0, 5.0};   // 5 timed calls; the warm-up covers both input sets
    policy.full = {1, 5, 5, 1.0, 5.0};
    policy.round = {1, 4, 4, 1.0, 5.0};
    policy.final_rounds = 3;
    policy.compare_rounds = 3;
    policy.defer_timed_gate = defer_timed_gate_;
    evaluator_ = std::make_unique<evaluation::Evaluator>(*candidates_, *reference_, task_, policy);
    evaluator_->prepare(compile("reference.cpp", corpus_file("softmax/reference.cpp")));
  }

  compile::Artifact compile(const std::string& name, const std::string& source) {
    compile::Artifact artifact = compiler_->compile({"cpu", source, name, {}, ""});
    EXPECT_EQ(artifact.verdict, Verdict::ok) << artifact.log;
    return artifact;
  }

  /// Gate and quick timing; the handle of the loaded candidate.
  int passes_quick(const std::string& name, const std::string& source) {
    const evaluation::CandidateEvaluation evaluation = evaluator_->evaluate(compile(name, source));
    EXPECT_EQ(evaluation.verdict, Verdict::ok) << evaluation.message;
    return evaluation.handle;
  }

  bool defer_timed_gate_ = false;  // EvaluationPolicy::defer_timed_gate
  Task task_;
  std::unique_ptr<compile::ToolchainCompiler> compiler_;
  std::unique_ptr<worker::ProcessWorker> candidates_, reference_;
  std::unique_ptr<evaluation::Evaluator> evaluator_;
};

// Gate: 2 calls at the timed shape; quick: 3 rounds (quick_rounds), each of 2 warm-up calls
// (quick_reference's 2, which cover both input sets) + 4 timed calls (quick_round_measurement).
constexpr int kHonestThroughQuick = 2 + 3 * (2 + 4);

TEST_F(LaterRungChecks, AcceptanceComparisonFindsAChallengerThatStoppedComputing) {
  const int honest = passes_quick("honest.cpp", corpus_file("softmax/cpu/honest_simple.cpp"));
  const int lazy = passes_quick("lazy.cpp", lazy_after(kHonestThroughQuick));
  const evaluation::CompareOutcome outcome = evaluator_->compare(honest, lazy);
  EXPECT_FALSE(outcome.paired.has_value());
  EXPECT_EQ(outcome.failed_handle, lazy);
  EXPECT_EQ(outcome.verdict, Verdict::wrong_answer);
  EXPECT_NE(outcome.message.find("acceptance timing"), std::string::npos) << outcome.message;
  // Honest against honest: every round checked, and a judged comparison.
  const int again = passes_quick("honest_again.cpp",
                                 corpus_file("softmax/cpu/honest_simple.cpp") + "\n// again\n");
  const evaluation::CompareOutcome fair = evaluator_->compare(honest, again);
  ASSERT_TRUE(fair.paired.has_value()) << fair.message;
  EXPECT_EQ(fair.failed_handle, -1);
}

TEST_F(LaterRungChecks, FullAndFinalRungsFindAKernelThatStoppedComputing) {
  const int lazy = passes_quick("lazy.cpp", lazy_after(kHonestThroughQuick));
  const evaluation::FullRung full = evaluator_->full_rung(lazy);
  EXPECT_EQ(full.verdict, Verdict::wrong_answer) << full.message;
  EXPECT_NE(full.message.find("full timing"), std::string::npos) << full.message;
  const evaluation::Evaluator::PairedSamples paired = evaluator_->time_paired(lazy);
  EXPECT_NE(paired.failure.find("wrong_answer"), std::string::npos) << paired.failure;
  EXPECT_NE(paired.failure.find("final timing"), std::string::npos) << paired.failure;
}

TEST_F(LaterRungChecks, HonestKernelPassesEveryCheckedRung) {
  const int honest = passes_quick("honest.cpp", corpus_file("softmax/cpu/honest_simple.cpp"));
  const evaluation::FullRung full = evaluator_->full_rung(honest);
  EXPECT_EQ(full.verdict, Verdict::ok) << full.message;
  // Rung 2's reference is timed in rounds interleaved with the candidate's on each workload
  // (quick_reference rounds of 4 calls: before, between and after full_rounds candidate
  // rounds), and its speedup is over their pooled median.
  ASSERT_FALSE(full.workloads.empty());
  for (const evaluation::FullRung::Entry& entry : full.workloads) {
    ASSERT_EQ(entry.reference_rounds_ms.size(), 4u) << entry.workload;  // full_rounds 3, + 1
    std::vector<double> pooled;
    for (const std::vector<double>& round : entry.reference_rounds_ms) {
      EXPECT_EQ(round.size(), 4u) << entry.workload;
      pooled.insert(pooled.end(), round.begin(), round.end());
    }
    std::sort(pooled.begin(), pooled.end());
    EXPECT_DOUBLE_EQ(entry.reference_median_ms, (pooled[7] + pooled[8]) / 2) << entry.workload;
    // Three candidate rounds of at least 5 calls each, pooled.
    EXPECT_GE(entry.candidate.samples_ms.size(), 15u) << entry.workload;
    EXPECT_DOUBLE_EQ(entry.speedup,
                     entry.reference_median_ms / entry.candidate.summary.median_ms);
  }
  EXPECT_TRUE(evaluator_->time_paired(honest).failure.empty());
}


// The ladder's deferral (EvaluationPolicy::defer_timed_gate, issue 21): rung 0 runs the gate
// workloads' cases only and rung 1 checks no call, so a kernel that skips its work at the timed
// size passes both; the timed workloads' cases then run before anything that decides
// (gate_at_full_size: rung 2, a comparison, rung 3), once per handle, and fail it there.
class DeferredTimedGate : public LaterRungChecks {
 protected:
  DeferredTimedGate() { defer_timed_gate_ = true; }
};

TEST_F(DeferredTimedGate, RungsZeroAndOneLeaveTheTimedSizeToTheFirstDecidingRung) {
  const evaluation::CandidateEvaluation lazy_rungs =
      evaluator_->evaluate(compile("lazy.cpp", lazy_after(0)));
  ASSERT_EQ(lazy_rungs.verdict, Verdict::ok) << lazy_rungs.message;
  ASSERT_FALSE(lazy_rungs.rungs.empty());
  const nlohmann::json& gate = lazy_rungs.rungs.front().detail;
  EXPECT_GT(gate.at("cases_deferred").get<int>(), 0) << gate.dump();
  EXPECT_EQ(gate.at("cases_checked"), gate.at("cases_planned")) << gate.dump();
  const int lazy = lazy_rungs.handle;

  const auto first = evaluator_->gate_at_full_size(lazy, *candidates_);
  EXPECT_TRUE(first.ran);
  EXPECT_EQ(first.verdict, Verdict::wrong_answer) << first.message;
  EXPECT_NE(first.message.find("the gate at full size"), std::string::npos) << first.message;
  EXPECT_GT(first.cases, 0);
  const auto again = evaluator_->gate_at_full_size(lazy, *candidates_);
  EXPECT_FALSE(again.ran);  // once per handle: the verdict is remembered
  EXPECT_EQ(again.verdict, Verdict::wrong_answer);

  const evaluation::FullRung full = evaluator_->full_rung(lazy);
  EXPECT_EQ(full.verdict, Verdict::wrong_answer) << full.message;
  EXPECT_TRUE(full.gate_failed);
  EXPECT_TRUE(full.workloads.empty());  // nothing was timed
  const int honest = passes_quick("honest.cpp", corpus_file("softmax/cpu/honest_simple.cpp"));
  const evaluation::CompareOutcome compared = evaluator_->compare(honest, lazy);
  EXPECT_FALSE(compared.paired.has_value());
  EXPECT_EQ(compared.failed_handle, lazy);
  EXPECT_EQ(compared.verdict, Verdict::wrong_answer);
  EXPECT_NE(evaluator_->time_paired(lazy).failure.find("wrong_answer"), std::string::npos);
}

TEST_F(DeferredTimedGate, HonestKernelPassesTheTimedSizeOnceAndEveryLaterRung) {
  const int honest = passes_quick("honest.cpp", corpus_file("softmax/cpu/honest_simple.cpp"));
  const auto gate = evaluator_->gate_at_full_size(honest, *candidates_);
  EXPECT_TRUE(gate.ran);
  EXPECT_EQ(gate.verdict, Verdict::ok) << gate.message;
  EXPECT_GT(gate.seconds, 0.0);
  const evaluation::FullRung full = evaluator_->full_rung(honest);  // the gate does not run again
  EXPECT_EQ(full.verdict, Verdict::ok) << full.message;
  EXPECT_FALSE(full.gate_failed);
  EXPECT_TRUE(evaluator_->time_paired(honest).failure.empty());
}

TEST_F(LaterRungChecks, WithoutDeferralTheGateFindsASkippedTimedSizeAtRungZero) {
  const evaluation::CandidateEvaluation lazy =
      evaluator_->evaluate(compile("lazy.cpp", lazy_after(0)));
  EXPECT_EQ(lazy.verdict, Verdict::wrong_answer) << lazy.message;
  ASSERT_FALSE(lazy.rungs.empty());
  EXPECT_EQ(lazy.rungs.back().rung, Rung::gate);
  EXPECT_EQ(lazy.rungs.front().detail.at("cases_deferred").get<int>(), 0);
  // Nothing deferred: the plane has nothing to run later.
  const int honest = passes_quick("honest.cpp", corpus_file("softmax/cpu/honest_simple.cpp"));
  EXPECT_FALSE(evaluator_->gate_at_full_size(honest, *candidates_).ran);
}
}  // namespace
}  // namespace kforge

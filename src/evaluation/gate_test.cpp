// The gate's plan: which cases rung 0 runs for a task.
#include "evaluation/gate.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/scratch_dir.h"

namespace kforge::evaluation {
namespace {

Task matrix_task(bool strided, int64_t timed_rows) {
  Task task;
  task.signature.tensors = {{"x", TensorRole::input, DType::f32, {"rows", "cols"}, strided},
                            {"y", TensorRole::output, DType::f32, {"rows", "cols"}}};
  task.workloads = {{"one", {{"rows", 1}, {"cols", 1}}, false},
                    {"tail", {{"rows", 3}, {"cols", 33}}, false},
                    {"big", {{"rows", timed_rows}, {"cols", 1024}}, true}};
  return task;
}

TEST(PlanGate, SeedsCycleDistributionsAndTheTimedWorkloadComesLast) {
  const std::vector<GateCase> cases = plan_gate(matrix_task(false, 64), GatePlan{});
  // 2 gate workloads x (3 seeds + pareto + spike) + the timed one
  ASSERT_EQ(cases.size(), 11u);
  EXPECT_EQ(cases[0].distribution, "uniform");
  EXPECT_EQ(cases[1].distribution, "normal");
  EXPECT_EQ(cases[2].distribution, "heavy_tailed");
  EXPECT_NE(cases[0].seed, cases[1].seed);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(cases[i].calls, 2);
    EXPECT_TRUE(cases[i].late_write_check);
    EXPECT_FALSE(cases[i].padded);
  }
  EXPECT_EQ(cases[10].workload.name, "big");
  EXPECT_EQ(cases[10].calls, 2);  // 256 KiB of outputs: read back twice
  EXPECT_FALSE(cases[10].late_write_check);
  EXPECT_NE(cases[10].label().find("workload 'big'"), std::string::npos);
}

TEST(PlanGate, DistributionsContinueAcrossWorkloadsSoEveryOneIsDrawn) {
  Task task = matrix_task(false, 64);
  task.distributions = {"uniform", "normal", "heavy_tailed", "small"};
  const std::vector<GateCase> cases = plan_gate(task, GatePlan{});
  ASSERT_EQ(cases.size(), 11u);  // 2 gate workloads x (3 seeds + 2 adversarial) + the timed one
  EXPECT_EQ(cases[2].distribution, "heavy_tailed");
  EXPECT_EQ(cases[3].workload.name, "tail");
  EXPECT_EQ(cases[3].distribution, "small");  // would never be drawn if each workload restarted
  EXPECT_EQ(cases[4].distribution, "uniform");
}

TEST(PlanGate, LargeTimedOutputsAreCalledOnce) {
  const std::vector<GateCase> cases = plan_gate(matrix_task(false, 1 << 17), GatePlan{});
  EXPECT_EQ(cases.back().calls, 1);  // 512 MiB of outputs
}

TEST(PlanGate, StridedInputsAddANonContiguousCasePerGateWorkload) {
  const std::vector<GateCase> cases = plan_gate(matrix_task(true, 64), GatePlan{});
  ASSERT_EQ(cases.size(), 13u);
  int padded = 0;
  for (const GateCase& gate_case : cases) {
    if (!gate_case.padded) continue;
    ++padded;
    EXPECT_FALSE(gate_case.workload.timed);
    EXPECT_NE(gate_case.label().find("non-contiguous"), std::string::npos);
  }
  EXPECT_EQ(padded, 2);
}

TEST(PlanGate, AdversarialDistributionsAreAddedPerGateWorkloadUnlessListed) {
  Task task = matrix_task(false, 64);
  std::vector<GateCase> cases = plan_gate(task, GatePlan{});
  std::vector<std::string> added;
  for (const GateCase& gate_case : cases) {
    if (!gate_case.adversarial) continue;
    EXPECT_FALSE(gate_case.workload.timed);
    EXPECT_EQ(gate_case.calls, 2);
    added.push_back(gate_case.workload.name + "/" + gate_case.distribution);
  }
  EXPECT_EQ(added, (std::vector<std::string>{"one/pareto", "one/spike", "tail/pareto",
                                             "tail/spike"}));
  // Listed by the task: cycled like any other distribution, not added again.
  task.distributions = {"uniform", "spike"};
  cases = plan_gate(task, GatePlan{});
  int spike_cases = 0, adversarial = 0;
  for (const GateCase& gate_case : cases) {
    spike_cases += gate_case.distribution == "spike";
    adversarial += gate_case.adversarial;
  }
  EXPECT_EQ(adversarial, 2);  // pareto on each gate workload
  EXPECT_EQ(spike_cases, 3);  // every other one of the 6 listed cases; the timed one is uniform
  GatePlan none;
  none.adversarial_distributions.clear();
  EXPECT_EQ(plan_gate(matrix_task(false, 64), none).size(), 7u);
}

TEST(PlanGate, SeedsAreDistinctAcrossWorkloadsAndFollowTheBaseSeed) {
  // Inputs are counter-based: under one seed a smaller workload's inputs are a prefix of a
  // larger one's. Every case must therefore have its own seed, and a run stays reproducible.
  const std::vector<GateCase> cases = plan_gate(matrix_task(true, 64), GatePlan{});
  std::set<uint64_t> seeds;
  for (const GateCase& gate_case : cases) seeds.insert(gate_case.seed);
  EXPECT_EQ(seeds.size(), cases.size());
  const std::vector<GateCase> again = plan_gate(matrix_task(true, 64), GatePlan{});
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(cases[i].seed, again[i].seed);
  GatePlan other;
  other.base_seed = 7;
  EXPECT_NE(plan_gate(matrix_task(true, 64), other)[0].seed, cases[0].seed);
  EXPECT_EQ(workload_seed(7, "one", 0), workload_seed(7, "one", 0));
  EXPECT_NE(workload_seed(7, "one", 0), workload_seed(7, "two", 0));
  EXPECT_NE(workload_seed(7, "one", 0), workload_seed(7, "one", 1));
}

TEST(PlanGate, ATaskWithoutDistributionsIsAnError) {
  Task task = matrix_task(false, 64);
  task.distributions.clear();
  EXPECT_THROW(plan_gate(task, GatePlan{}), Error);
}

// A worker whose every kernel writes y[i] = i (so a candidate agrees with the reference), and
// whose candidate (handle 1) reports the work audit's `foreign_work` on the second call.
class AuditedWorker : public worker::Worker {
 public:
  std::string foreign_work;

  worker::DeviceInfo device_info() override { return {}; }
  worker::LoadResult load(const worker::LoadRequest&, double) override {
    worker::LoadResult loaded;
    loaded.handle = loads_++;
    return loaded;
  }
  worker::RunResult run(const worker::RunRequest& request, double) override {
    const int64_t n = request.workload.dims.at("rows") * request.workload.dims.at("cols");
    worker::RunResult result;
    result.output_bytes = n * 4;
    result.calls_completed = request.calls;
    result.work_audited = true;
    MappedFile file(request.output_path, MappedFile::Mode::write, n * 4 * request.calls);
    auto* y = reinterpret_cast<float*>(file.data());
    for (int64_t i = 0; i < n * request.calls; ++i) y[i] = static_cast<float>(i % n);
    if (request.handle == 1 && !foreign_work.empty()) {
      result.foreign_work = "call 2: " + foreign_work;
    }
    return result;
  }
  worker::TimeResult time(const worker::TimeRequest&, double) override { return {}; }
  void shutdown() override {}

 private:
  int loads_ = 0;
};

GateOutcome gate_with(AuditedWorker& worker) {
  const Task task = matrix_task(false, 64);
  ScratchDir scratch("kforge_gate_test");
  ReferenceOracle oracle(worker, task, scratch, 10.0);
  compile::Artifact reference;
  reference.path = "reference.so";
  oracle.load(reference);
  const int candidate = worker.load({"candidate.so"}, 10.0).handle;
  EXPECT_EQ(candidate, 1);
  return run_gate(worker, candidate, oracle, task, plan_gate(task, GatePlan{}), scratch, 10.0);
}

TEST(GateWorkAudit, WorkOutsideTheStreamIsRejectedByPolicy) {
  AuditedWorker worker;
  worker.foreign_work = "1 kernel ('softmax(float const*)') on stream 14";
  const GateOutcome outcome = gate_with(worker);
  EXPECT_EQ(outcome.verdict, Verdict::rejected_by_policy);
  EXPECT_NE(outcome.message.find("work outside args->stream: call 2: 1 kernel "
                                 "('softmax(float const*)') on stream 14"),
            std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("workload 'one'"), std::string::npos) << outcome.message;
  EXPECT_EQ(outcome.cases_checked, 0);
}

TEST(GateWorkAudit, AnAuditWithoutFindingsPasses) {
  AuditedWorker worker;
  const GateOutcome outcome = gate_with(worker);
  EXPECT_EQ(outcome.verdict, Verdict::ok) << outcome.message;
  // Every planned case (the adversarial pareto and spike cases included) ran.
  EXPECT_EQ(outcome.cases_checked,
            static_cast<int>(plan_gate(matrix_task(false, 64), GatePlan{}).size()));
  EXPECT_GT(outcome.cases_checked, 7);
}

// An fp32 output that missed the element tolerance on a heavy-tailed case: one element of a
// cancelling sum off, the norm-wise bound held.
OutputComparison one_element_off() {
  OutputComparison comparison;
  comparison.passed = false;
  comparison.mismatched_elements = 1;
  comparison.norm_passed = true;
  return comparison;
}

TEST(HeavyTailedOutput, PassesInAggregateWhenTheRuleHoldsAppliedOrNot) {
  PrecisionCheck applied;  // the candidate's RMS error within the ratio of the fp32 model's
  applied.applied = true;
  applied.passed = true;
  EXPECT_TRUE(heavy_tailed_output_passes(one_element_off(), &applied));
  // The fp32 model exact to rounding in RMS (pareto sums of a few large terms): the rule does
  // not apply and the aggregate judgement rests on the norm-wise bound (H200, L1/73 and L1/97).
  PrecisionCheck exact_model;
  exact_model.applied = false;
  exact_model.passed = true;
  EXPECT_TRUE(heavy_tailed_output_passes(one_element_off(), &exact_model));
}

TEST(HeavyTailedOutput, FailsOnNormNonFiniteTheRuleOrNoModel) {
  PrecisionCheck rule;
  rule.passed = true;
  OutputComparison norm = one_element_off();
  norm.norm_passed = false;  // a subsampled reduction misses a spike: the norm says so
  EXPECT_FALSE(heavy_tailed_output_passes(norm, &rule));
  OutputComparison nan = one_element_off();
  nan.nonfinite_mismatches = 1;
  EXPECT_FALSE(heavy_tailed_output_passes(nan, &rule));
  PrecisionCheck tf32;  // below fp32 precision in RMS
  tf32.applied = true;
  tf32.passed = false;
  EXPECT_FALSE(heavy_tailed_output_passes(one_element_off(), &tf32));
  EXPECT_FALSE(heavy_tailed_output_passes(one_element_off(), nullptr));
  OutputComparison passed;  // nothing to accept
  EXPECT_FALSE(heavy_tailed_output_passes(passed, &rule));
  OutputComparison only_norm = one_element_off();  // the norm alone failed: not element-only
  only_norm.mismatched_elements = 0;
  only_norm.norm_passed = false;
  EXPECT_FALSE(heavy_tailed_output_passes(only_norm, &rule));
}

}  // namespace
}  // namespace kforge::evaluation

// The simulation runner of issue 21: measured spaces (space.h), their replay through the
// optimizer's seams (replay_plane.h) and what the experiments read off a simulated run
// (simulated_run.h).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "common/error.h"
#include "search/optimizer_test_util.h"
#include "simulation/replay_plane.h"
#include "simulation/simulated_run.h"
#include "simulation/space.h"
#include "task/task_loader.h"

namespace kforge::simulation {
namespace {
namespace fs = std::filesystem;

constexpr double kReferenceMs = 20.0;

// The toy family's true payoff: serial 4 ms, simd 12 ms / ACCUMULATORS, halved by PARALLEL=1;
// the tiled variant (wrong.cpp) gives wrong answers.
double toy_ms(const generation::TemplatePoint& point) {
  if (point.variant == "serial") return 4.0;
  const double ms = 12.0 / std::stod(point.params.at("ACCUMULATORS"));
  return point.params.at("PARALLEL") == "1" ? ms / 2.0 : ms;
}

std::vector<double> noisy(double ms) {
  return {ms * 0.99, ms, ms * 1.01, ms * 1.005, ms * 0.995, ms, ms * 1.02, ms * 0.98};
}

class SimulationTest : public search::fakes::OptimizerTest {
 protected:
  // A space of the toy family as if measured: every point, with the payoff above.
  SpaceRecord toy_space() {
    const generation::KernelFamily family =
        generation::load_family((root_ / "kernels").string(), "cpu", "toy");
    const generation::TemplatesGenerator generator(family);
    SpaceRecord space;
    space.task = task_.name;
    space.task_path = task_.source_path;
    space.task_hash = task_hash(task_);
    space.family = "toy";
    space.backend = "cpu";
    space.dtype = "f32";
    space.device = "recorded cpu";
    space.toolchain = "recorded-cc 1";
    space.timed_workload = "big";
    space.reference_quick_samples_ms = noisy(kReferenceMs);
    space.reference_quick_s = 0.5;
    for (const generation::TemplatePoint& point : all_points(family)) {
      PointRecord p;
      p.id = point.id();
      p.job_key = job_key(generator.make_proposal(point).job);
      p.variant = point.variant;
      p.decomposition = family.variant(point.variant)->decomposition;
      p.params = point.params;
      p.gate_s = 0.1;
      if (point.variant == "tiled") {
        p.verdict = Verdict::wrong_answer;
        p.message = "max error 0.5 at 17";
      } else {
        p.quick_s = 0.2;
        p.quick_samples_ms = noisy(toy_ms(point));
        p.full_s = 1.0;
        p.full.push_back({"big", noisy(toy_ms(point)), kReferenceMs});
        p.full_geomean_speedup = kReferenceMs / toy_ms(point);
      }
      space.points.push_back(std::move(p));
    }
    return space;
  }
  SimulatedRunOptions options(const std::string& arm, uint64_t seed) {
    SimulatedRunOptions o;
    o.arm = parse_arm(arm);
    o.seed = seed;
    o.steps = 4;
    o.scratch = root_ / "scratch";
    o.kernels_root = root_ / "kernels";
    return o;
  }
};

TEST_F(SimulationTest, AllPointsSpanEveryVariantsParameterProduct) {
  const generation::KernelFamily family =
      generation::load_family((root_ / "kernels").string(), "cpu", "toy");
  const std::vector<generation::TemplatePoint> points = all_points(family);
  ASSERT_EQ(points.size(), 1u + 4u * 2u + 1u);
  EXPECT_EQ(points[0].variant, "serial");
  EXPECT_EQ(points[1].id(), "simd[ACCUMULATORS=1,PARALLEL=0]");  // first values first
  EXPECT_EQ(points.back().variant, "tiled");
  compile::CompileJob job{"cpu", "text", "simd.cpp", {{"KF_PARALLEL", "1"}, {"KF_ACCUMULATORS", "4"}}, ""};
  EXPECT_EQ(job_key(job), "simd.cpp;KF_ACCUMULATORS=4;KF_PARALLEL=1");
}

TEST_F(SimulationTest, ASpaceFileRoundTripsAndBadFilesAreNamed) {
  const SpaceRecord space = toy_space();
  const fs::path file = root_ / "space.json";
  save_space(space, file.string());
  const SpaceRecord back = load_space(file.string());
  ASSERT_EQ(back.points.size(), space.points.size());
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(space));
  EXPECT_EQ(back.best()->id, "simd[ACCUMULATORS=8,PARALLEL=1]");

  std::ofstream(root_ / "bad.json") << "{not json";
  std::ofstream(root_ / "v9.json") << R"({"version": 9})";
  for (const std::string name : {"missing.json", "bad.json", "v9.json"}) {
    try {
      load_space((root_ / name).string());
      FAIL() << name << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST_F(SimulationTest, TheReplayPlaneAnswersFromTheRecordsWithResampledNoise) {
  const SpaceRecord space = toy_space();
  SimulatedClock clock;
  ReplayPlane plane(task_, space, {}, clock, 5);
  ReplayBuilds builds(space, clock);
  IdleWorker idle("cpu", "recorded cpu");
  const generation::TemplatesGenerator generator(
      generation::load_family((root_ / "kernels").string(), "cpu", "toy"));
  const auto build = [&](const std::string& variant, std::map<std::string, std::string> params) {
    return builds.submit(generator.make_proposal({variant, params}).job).get();
  };
  const compile::Artifact fast = build("simd", {{"ACCUMULATORS", "8"}, {"PARALLEL", "1"}});
  const evaluation::CandidateEvaluation first = plane.evaluate(fast, idle);
  ASSERT_EQ(first.verdict, Verdict::ok);
  EXPECT_NEAR(first.timing.median_ms, 0.75, 0.75 * 0.03);
  EXPECT_EQ(first.samples_ms.size(), 8u);
  for (double ms : first.samples_ms) EXPECT_TRUE(ms >= 0.75 * 0.98 - 1e-12 && ms <= 0.75 * 1.02 + 1e-12);
  EXPECT_DOUBLE_EQ(clock.now_s(), 0.1 + 0.2);  // the recorded gate and quick seconds

  const evaluation::CandidateEvaluation wrong = plane.evaluate(build("tiled", {}), idle);
  EXPECT_EQ(wrong.verdict, Verdict::wrong_answer);
  EXPECT_NE(wrong.message.find("max error 0.5"), std::string::npos);

  const evaluation::FullRung full = plane.full_rung(first.handle, idle);
  ASSERT_EQ(full.workloads.size(), 1u);
  EXPECT_NEAR(full.geomean_speedup, kReferenceMs / 0.75, 0.03 * kReferenceMs / 0.75);
  const evaluation::CandidateEvaluation slow = plane.evaluate(build("serial", {}), idle);
  const evaluation::CompareOutcome compared = plane.compare(slow.handle, first.handle, idle);
  ASSERT_TRUE(compared.paired);
  EXPECT_EQ(compared.paired->outcome, ComparisonOutcome::faster);
  EXPECT_NEAR(compared.paired->speedup.speedup, 4.0 / 0.75, 0.2);

  // A build the space lacks is a harness error naming it, never a made-up measurement.
  compile::Artifact unknown;
  unknown.key = "other.cpp;KF_X=1";
  EXPECT_THROW(plane.evaluate(unknown, idle), Error);
  EXPECT_THROW(idle.run({}, 1.0), Error);
}

TEST_F(SimulationTest, ASimulatedRunFindsTheSpacesBestAndIsDeterministicPerSeed) {
  const SpaceRecord space = toy_space();
  const RunOutcome a = simulate_run(task_, space, *store_, options("htam", 3));
  EXPECT_EQ(worker_.runs + worker_.times, 0);
  EXPECT_GT(a.candidates, 3);
  EXPECT_GT(a.device_s, 0.0);
  EXPECT_NEAR(a.space_best_speedup, kReferenceMs / 0.75, 1e-9);
  EXPECT_GT(a.final_speedup, 5.0);  // beyond the serial hint (5x): a simd point won
  ASSERT_FALSE(a.curve.empty());
  EXPECT_GE(a.candidates_to_best, 1);
  EXPECT_LE(a.device_s_to_best, a.search_device_s + 1e-9);
  EXPECT_DOUBLE_EQ(a.curve.back().speedup, a.final_speedup);

  fresh_store();
  const RunOutcome b = simulate_run(task_, space, *store_, options("htam", 3));
  EXPECT_EQ(b.best_id, a.best_id);
  EXPECT_EQ(b.candidates, a.candidates);
  EXPECT_DOUBLE_EQ(b.device_s, a.device_s);

  SpaceRecord other = space;
  other.task_hash = "another";
  EXPECT_THROW(simulate_run(task_, other, *store_, options("htam", 3)), Error);
}

TEST_F(SimulationTest, FullFidelitySpendsMoreDeviceSecondsThanTheLadder) {
  const SpaceRecord space = toy_space();
  const RunOutcome ladder = simulate_run(task_, space, *store_, options("htam", 1));
  fresh_store();
  const RunOutcome full = simulate_run(task_, space, *store_, options("full:htam", 1));
  EXPECT_GT(full.search_device_s, ladder.search_device_s);
}

// The cohort options reach the optimizer: a step's proposals are the ladder's cohort and eta
// its cut, so 6 proposals a step cut at eta 6 (one promoted by rank) spend less on rung 2 than
// the same proposals cut at eta 2 (three), on the same candidates.
TEST_F(SimulationTest, ProposalsAndEtaSetTheLaddersCohortAndCut) {
  const SpaceRecord space = toy_space();
  SimulatedRunOptions strict = options("htam", 1);
  strict.proposals_per_step = 6;
  strict.eta = 6.0;
  const RunOutcome a = simulate_run(task_, space, *store_, strict);
  fresh_store();
  SimulatedRunOptions loose = strict;
  loose.eta = 2.0;
  const RunOutcome b = simulate_run(task_, space, *store_, loose);
  EXPECT_EQ(a.candidates, b.candidates);
  EXPECT_LT(a.search_device_s, b.search_device_s);
  // One step of 1 proposal against one of 3: two candidates more (the toy space has room).
  SimulatedRunOptions one = options("htam", 1);
  one.steps = 1;
  one.proposals_per_step = 1;
  fresh_store();
  const RunOutcome single = simulate_run(task_, space, *store_, one);
  one.proposals_per_step = 3;
  fresh_store();
  const RunOutcome triple = simulate_run(task_, space, *store_, one);
  EXPECT_EQ(triple.candidates, single.candidates + 2);
}

// A space measured with the timed workloads' gate cases apart (measure_space since issue 21's
// deferral): the ladder's replay charges them at the first deciding rung, once, and fails a
// point there; full fidelity's charges and fails them at rung 0.
TEST_F(SimulationTest, TheReplayDefersTheGateAtFullSizeUnderTheLadderOnly) {
  SpaceRecord space = toy_space();
  space.deferred_timed_gate = true;
  const std::string lazy_id = "simd[ACCUMULATORS=8,PARALLEL=1]";
  for (PointRecord& p : space.points) {
    if (p.verdict != Verdict::ok) continue;
    p.gate_full_size_s = 2.0;
    if (p.id == lazy_id) {
      p.verdict = Verdict::wrong_answer;
      p.message = "the gate at full size (deferred): output 'y' is NaN at 0";
      p.gate_full_size_failed = true;
      p.full.clear();
      p.full_geomean_speedup.reset();
    }
  }
  IdleWorker idle("cpu", "recorded cpu");
  const generation::TemplatesGenerator generator(
      generation::load_family((root_ / "kernels").string(), "cpu", "toy"));
  const auto artifact = [&](ReplayBuilds& builds, std::map<std::string, std::string> params) {
    return builds.submit(generator.make_proposal({"simd", params}).job).get();
  };
  const std::map<std::string, std::string> lazy = {{"ACCUMULATORS", "8"}, {"PARALLEL", "1"}};
  const std::map<std::string, std::string> honest = {{"ACCUMULATORS", "4"}, {"PARALLEL", "1"}};
  {
    SimulatedClock clock;
    evaluation::EvaluationPolicy policy;
    policy.defer_timed_gate = true;
    ReplayPlane plane(task_, space, policy, clock, 5);
    ReplayBuilds builds(space, clock);
    const evaluation::CandidateEvaluation quick = plane.evaluate(artifact(builds, lazy), idle);
    ASSERT_EQ(quick.verdict, Verdict::ok) << quick.message;  // rungs 0-1 passed
    EXPECT_DOUBLE_EQ(clock.now_s(), 0.1 + 0.2);
    ASSERT_EQ(quick.rungs.size(), 2u);
    EXPECT_DOUBLE_EQ(quick.rungs[0].seconds, 0.1);
    const auto gate = plane.gate_at_full_size(quick.handle, idle);
    EXPECT_TRUE(gate.ran);
    EXPECT_EQ(gate.verdict, Verdict::wrong_answer);
    EXPECT_DOUBLE_EQ(clock.now_s(), 0.1 + 0.2 + 2.0);
    const evaluation::FullRung full = plane.full_rung(quick.handle, idle);
    EXPECT_TRUE(full.gate_failed);
    EXPECT_EQ(full.verdict, Verdict::wrong_answer);
    EXPECT_DOUBLE_EQ(clock.now_s(), 0.1 + 0.2 + 2.0);  // once per handle, and no rung 2
    const evaluation::CandidateEvaluation fine = plane.evaluate(artifact(builds, honest), idle);
    const evaluation::CompareOutcome compared = plane.compare(fine.handle, quick.handle, idle);
    EXPECT_EQ(compared.failed_handle, quick.handle);
    EXPECT_FALSE(compared.paired.has_value());
    EXPECT_EQ(plane.full_rung(fine.handle, idle).verdict, Verdict::ok);
  }
  {
    SimulatedClock clock;
    ReplayPlane plane(task_, space, {}, clock, 5);  // no deferral: all at rung 0
    ReplayBuilds builds(space, clock);
    const evaluation::CandidateEvaluation gated = plane.evaluate(artifact(builds, lazy), idle);
    EXPECT_EQ(gated.verdict, Verdict::wrong_answer);
    ASSERT_EQ(gated.rungs.size(), 1u);
    EXPECT_EQ(gated.rungs[0].rung, Rung::gate);
    EXPECT_DOUBLE_EQ(clock.now_s(), 0.1 + 2.0);
    EXPECT_DOUBLE_EQ(gated.rungs[0].seconds, 0.1 + 2.0);
    EXPECT_FALSE(plane.gate_at_full_size(0, idle).ran);
    // A passing point's rung 0 carries its timed workloads' cases too: the search's budget
    // sums the rungs' records, so full fidelity's search device seconds include them.
    const evaluation::CandidateEvaluation passed = plane.evaluate(artifact(builds, honest), idle);
    ASSERT_EQ(passed.verdict, Verdict::ok) << passed.message;
    EXPECT_DOUBLE_EQ(passed.rungs[0].seconds, 0.1 + 2.0);
  }
  // The search never takes the point for its best: it fails before it could be one. Under
  // full fidelity every evaluated point paid its 2 s at rung 0, and the search's device
  // seconds (the budget, which sums the rungs' records) say so.
  for (const std::string arm : {"htam", "full:htam"}) {
    fresh_store();
    const RunOutcome run = simulate_run(task_, space, *store_, options(arm, 2));
    EXPECT_NE(run.best_id, lazy_id) << arm;
    EXPECT_GT(run.final_speedup, 1.0) << arm;
    if (arm == "full:htam") EXPECT_GE(run.search_device_s, 2.0 * run.candidates) << arm;
  }
}

TEST_F(SimulationTest, ColdDefaultsMoveTheHintsStartAndKeepTheSpace) {
  const generation::KernelFamily family =
      generation::load_family((root_ / "kernels").string(), "cpu", "toy");
  const std::vector<generation::TemplatePoint> points = all_points(family);
  std::set<std::string> simd_defaults;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    generation::KernelFamily cold = family;
    randomize_defaults(cold, seed);
    ASSERT_EQ(cold.variants.size(), family.variants.size());
    for (size_t v = 0; v < family.variants.size(); ++v) {
      for (size_t p = 0; p < family.variants[v].params.size(); ++p) {
        std::vector<std::string> a = family.variants[v].params[p].values;
        std::vector<std::string> b = cold.variants[v].params[p].values;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "seed " << seed << ": the values are the same set";
      }
    }
    const generation::TemplateVariant* simd = cold.variant("simd");
    ASSERT_NE(simd, nullptr);
    simd_defaults.insert(simd->param("ACCUMULATORS")->values[0]);
    // The same points, whatever the defaults (the space is keyed by point, not by order).
    std::set<std::string> ids, cold_ids;
    for (const generation::TemplatePoint& p : points) ids.insert(p.id());
    for (const generation::TemplatePoint& p : all_points(cold)) cold_ids.insert(p.id());
    EXPECT_EQ(ids, cold_ids);
  }
  EXPECT_GT(simd_defaults.size(), 1u) << "20 seeds never moved the default";

  SimulatedRunOptions cold = options("htam", 2);
  cold.cold_defaults = true;
  const RunOutcome a = simulate_run(task_, toy_space(), *store_, cold);
  fresh_store();
  const RunOutcome b = simulate_run(task_, toy_space(), *store_, cold);
  EXPECT_EQ(a.best_id, b.best_id);
  EXPECT_EQ(a.candidates, b.candidates);
  EXPECT_GT(a.final_speedup, 1.0);
}

TEST(SimulationArms, ParseNamesPoliciesAblationsAndFidelity) {
  EXPECT_EQ(parse_arm("flat").policy, memory::PolicyKind::flat);
  const Arm ablated = parse_arm("htam-local-memory-prefix");
  EXPECT_TRUE(ablated.ablations.local_memory);
  EXPECT_TRUE(ablated.ablations.prefix);
  EXPECT_FALSE(ablated.ablations.hierarchy);
  EXPECT_EQ(parse_arm("full:htam").fidelity, search::Fidelity::full);
  EXPECT_THROW(parse_arm("greedy"), Error);
  EXPECT_THROW(parse_arm("flat-prefix"), Error);
  EXPECT_THROW(parse_arm("htam-speed"), Error);
}

TEST(SimulationCurve, AreaIsTheMeanBestSoFarOverTheHorizon) {
  // 1x until 2 s, 3x until 6 s, 5x after: over 10 s, (2*1 + 4*3 + 4*5) / 10.
  const std::vector<CurvePoint> curve = {{2.0, 1, 3.0}, {6.0, 4, 5.0}};
  EXPECT_DOUBLE_EQ(curve_area(curve, 10.0), (2.0 + 12.0 + 20.0) / 10.0);
  EXPECT_DOUBLE_EQ(curve_area(curve, 4.0), (2.0 + 6.0) / 4.0);
  EXPECT_DOUBLE_EQ(curve_area({}, 3.0), 1.0);
  EXPECT_THROW(curve_area(curve, 0.0), Error);
}

}  // namespace
}  // namespace kforge::simulation

#include "simulation/simulated_run.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "core/epilogue.h"
#include "generation/templates_generator.h"
#include "report/run_directory.h"
#include "search/optimizer.h"
#include "simulation/replay_plane.h"
#include "task/task_loader.h"

namespace kforge::simulation {
namespace fs = std::filesystem;

namespace {

constexpr double kWithinBest = 0.02;  // "within 2% of the run's final best" (issue 21)

// The new_best events of a run directory, in order: candidate ids.
std::vector<std::string> new_bests(const fs::path& run_dir) {
  std::vector<std::string> ids;
  std::ifstream events(run_dir / "events.jsonl");
  for (std::string line; std::getline(events, line);) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == "new_best") {
      ids.push_back(event.value("id", ""));
    }
  }
  return ids;
}

double true_speedup(const SpaceRecord& space, const std::string& artifact_key) {
  const PointRecord* point = space.find(artifact_key);
  return point != nullptr && point->full_geomean_speedup ? *point->full_geomean_speedup : 1.0;
}

}  // namespace

void randomize_defaults(generation::KernelFamily& family, uint64_t seed) {
  std::mt19937_64 rng(seed * 2654435761u + 7);
  const auto shuffle_default = [&rng](generation::TemplateParam& param) {
    if (param.values.size() < 2) return;
    std::uniform_int_distribution<size_t> pick(0, param.values.size() - 1);
    std::swap(param.values[0], param.values[pick(rng)]);
  };
  for (generation::TemplateVariant& variant : family.variants) {
    for (generation::TemplateParam& param : variant.params) shuffle_default(param);
    for (auto& [dtype, params] : variant.params_by_dtype) {
      for (generation::TemplateParam& param : params) shuffle_default(param);
    }
  }
}

Arm parse_arm(const std::string& name) {
  Arm arm;
  arm.name = name;
  std::string rest = name;
  if (rest.starts_with("full:")) {
    arm.fidelity = search::Fidelity::full;
    rest = rest.substr(5);
  }
  const size_t dash = rest.find('-');
  const std::string policy = rest.substr(0, dash);
  try {
    arm.policy = memory::parse_policy_kind(policy);
    if (dash != std::string::npos) {
      if (arm.policy != memory::PolicyKind::htam) throw Error("ablations apply to htam only");
      std::string ablations = rest.substr(dash + 1);
      // "local-memory" holds a dash of its own: split on the names, not on every dash.
      std::vector<std::string> names;
      for (const std::string known : {"local-memory", "hierarchy", "prefix"}) {
        if (const size_t at = ablations.find(known); at != std::string::npos) {
          names.push_back(known);
          ablations.erase(at, known.size());
        }
      }
      ablations.erase(std::remove(ablations.begin(), ablations.end(), '-'), ablations.end());
      if (!ablations.empty() || names.empty()) throw Error("unknown ablation in '" + rest + "'");
      arm.ablations = memory::parse_ablations(names);
    }
  } catch (const Error& e) {
    throw Error("arm '" + name + "': " + e.what() + " (arms: htam, flat, feedback, random, "
                "oneshot, htam-<prefix|hierarchy|local-memory>[-...], each optionally after "
                "'full:')");
  }
  return arm;
}

RunOutcome simulate_run(const Task& task, const SpaceRecord& space, memory::Store& store,
                        const SimulatedRunOptions& options) {
  if (!space.task_hash.empty() && space.task_hash != task_hash(task)) {
    throw Error("space of " + space.task + " was measured for another version of the task (" +
                space.task_path + "): measure it again");
  }
  SimulatedClock clock;
  // As make_real_plane: the ladder defers the timed workloads' gate cases, full fidelity
  // runs them at rung 0.
  evaluation::EvaluationPolicy policy;
  policy.defer_timed_gate = options.arm.fidelity == search::Fidelity::ladder;
  ReplayPlane plane(task, space, policy, clock, options.seed * 7919 + 17);
  ReplayBuilds builds(space, clock);
  IdleWorker worker(space.backend, space.device);
  IdleWorker reference(space.backend, space.device);
  generation::KernelFamily family = generation::load_family(
      (options.kernels_root.empty() ? fs::path(resource_root()) / "kernels" : options.kernels_root)
          .string(),
      space.backend, space.family);
  if (options.cold_defaults) randomize_defaults(family, options.seed);
  generation::TemplatesGenerator generator(std::move(family), space.dtype);
  generator.set_task_defines(task_defines(task));

  search::OptimizeOptions optimize;
  optimize.steps = options.steps;
  optimize.seed = options.seed;
  optimize.policy = options.arm.policy;
  optimize.ablations = options.arm.ablations;
  optimize.fidelity = options.arm.fidelity;
  optimize.eta = options.eta;
  optimize.proposals_per_step = options.proposals_per_step;
  // One folder per call, so that runs sharing a scratch folder (threads of one process) never
  // share a run directory.
  static std::atomic<uint64_t> next_run{0};
  const fs::path dir = options.scratch / ("run-" + std::to_string(next_run++));
  fs::remove_all(dir);
  RunOutcome outcome;
  outcome.task = task.name;
  outcome.arm = options.arm.name;
  outcome.seed = options.seed;
  if (const PointRecord* best = space.best()) outcome.space_best_speedup = *best->full_geomean_speedup;
  search::OptimizeResult result;
  {
    report::RunDirectory run_dir(dir, report::RunDirectory::Mode::create);
    search::Optimizer optimizer(task, space.backend, optimize, store, generator, plane, builds,
                                {&worker}, reference, run_dir, [](const std::string&) {});
    optimizer.set_clock([&clock] { return clock.now_s(); });
    result = optimizer.run();
  }
  std::map<std::string, const search::CandidateRecord*> by_id;
  for (const search::CandidateRecord& c : result.candidates) {
    by_id[c.id] = &c;
    if (c.duplicate_of.empty()) ++outcome.candidates;
  }
  outcome.device_s = plane.device_s();
  outcome.search_device_s = result.budget.contains("spent")
                                ? result.budget["spent"].value("device_s", 0.0)
                                : 0.0;
  for (const std::string& id : new_bests(dir)) {
    const auto found = by_id.find(id);
    if (found == by_id.end()) continue;
    const search::CandidateRecord& c = *found->second;
    outcome.curve.push_back({c.found_device_s, c.index + 1, true_speedup(space, c.artifact_key)});
  }
  if (result.best) {
    outcome.best_id = result.best->id;
    outcome.final_speedup = true_speedup(space, result.best->artifact_key);
    // The final choice among rung-2 candidates: the run has it once its search ended.
    if (outcome.curve.empty() || outcome.curve.back().speedup != outcome.final_speedup) {
      outcome.curve.push_back({outcome.search_device_s, outcome.candidates,
                               outcome.final_speedup});
    }
    for (const CurvePoint& point : outcome.curve) {
      if (point.speedup >= outcome.final_speedup * (1.0 - kWithinBest)) {
        outcome.candidates_to_best = point.candidates;
        outcome.device_s_to_best = point.device_s;
        break;
      }
    }
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return outcome;
}

double curve_area(const std::vector<CurvePoint>& curve, double horizon_s) {
  if (!(horizon_s > 0.0)) throw Error("curve_area: the horizon must be positive");
  double area = 0.0;
  double at = 0.0;
  double speedup = 1.0;
  for (const CurvePoint& point : curve) {
    const double until = std::min(point.device_s, horizon_s);
    if (until > at) {
      area += speedup * (until - at);
      at = until;
    }
    speedup = point.speedup;
  }
  area += speedup * std::max(0.0, horizon_s - at);
  return area / horizon_s;
}

}  // namespace kforge::simulation

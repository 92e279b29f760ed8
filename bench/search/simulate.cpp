// Issue 21's experiments as simulations over measured spaces (simulation/space.h): each run is a
// real search::Optimizer whose rungs a ReplayPlane answers from the recorded measurements, with
// noise resampled from the recorded samples, so seeds x arms x tasks cost seconds instead of
// device hours (kernel_tuner's simulation mode; van Werkhoven et al., FGCS 2019).
//
//   kforge_bench_simulate --spaces bench/search/spaces/cpu --seeds 10 \
//       --transfer-a softmax,rmsnorm,gemv --transfer-b log_softmax,layernorm,gemv_t \
//       --out bench/search/simulate_cpu.json --table bench/search/simulate_cpu.md
//
// 1. policies: every arm (htam, flat, feedback, random, oneshot, htam-prefix, htam-hierarchy,
//    htam-local-memory) on every space, from a fresh memory, `seeds` seeds each;
// 2. transfer: per seed, the A tasks in order into one memory (htam), then each B task from a
//    fresh memory and from a copy of A's, for htam and flat;
// 3. ladder: htam under the ladder and under full fidelity, from a fresh memory.
// Every ratio is a geomean over (task, seed) pairs with a 95% percentile-bootstrap interval over
// the pairs. --cold-defaults starts each decomposition's hint at a random point of its parameters
// instead of the family's defaults (what the search adds where the defaults are not good).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"
#include "common/scratch_dir.h"
#include "evaluation/statistics.h"
#include "memory/knowledge.h"
#include "memory/sqlite_store.h"
#include "simulation/simulated_run.h"
#include "task/task_loader.h"

namespace fs = std::filesystem;
using namespace kforge;
using simulation::RunOutcome;

namespace {

struct Loaded {
  simulation::SpaceRecord space;
  Task task;
};

// exp of the mean of `logs` and of the ends of its 95% percentile-bootstrap interval:
// {point, low, high} of a geomean (or of a geomean ratio, when `logs` are log-ratios).
std::array<double, 3> exp_mean_ci(const std::vector<double>& logs, uint64_t seed) {
  const auto statistic = [](std::span<const double> s) {
    return std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  };
  const evaluation::BootstrapInterval ci =
      evaluation::bootstrap_interval(logs, statistic, 0.95, 2000, seed);
  return {std::exp(statistic(logs)), std::exp(ci.low), std::exp(ci.high)};
}

// Geomean of `values` with a 95% bootstrap interval over them.
nlohmann::json geomean_ci(const std::vector<double>& values, uint64_t seed) {
  if (values.empty()) return nullptr;
  std::vector<double> logs;
  for (double x : values) logs.push_back(std::log(std::max(x, 1e-12)));
  const auto [point, low, high] = exp_mean_ci(logs, seed);
  return {{"geomean", point}, {"ci_low", low}, {"ci_high", high}, {"n", values.size()}};
}

nlohmann::json outcome_json(const RunOutcome& o, double horizon_s) {
  return {{"task", o.task}, {"arm", o.arm}, {"seed", o.seed}, {"candidates", o.candidates},
          {"device_s", o.device_s}, {"search_device_s", o.search_device_s},
          {"final_speedup", o.final_speedup}, {"space_best_speedup", o.space_best_speedup},
          {"best", o.best_id}, {"candidates_to_best", o.candidates_to_best},
          {"device_s_to_best", o.device_s_to_best},
          {"auc", simulation::curve_area(o.curve, horizon_s)}};
}

class Runner {
 public:
  Runner(const memory::Knowledge& seed, const fs::path& scratch, int steps, bool cold_defaults,
         double eta, int proposals)
      : seed_(seed),
        scratch_(scratch),
        steps_(steps),
        cold_defaults_(cold_defaults),
        eta_(eta),
        proposals_(proposals) {}

  // A fresh memory at `path` (seed knowledge only).
  void fresh(const fs::path& path) {
    fs::remove(path);
    memory::SqliteStore::open(path, seed_);
  }

  RunOutcome run(const Loaded& loaded, const std::string& arm, uint64_t seed,
                 const fs::path& memory) {
    std::unique_ptr<memory::SqliteStore> store = memory::SqliteStore::open(memory, seed_);
    simulation::SimulatedRunOptions options;
    options.arm = simulation::parse_arm(arm);
    options.seed = seed;
    options.steps = steps_;
    options.scratch = scratch_;
    options.cold_defaults = cold_defaults_;
    options.eta = eta_;
    options.proposals_per_step = proposals_;
    ++runs_;
    return simulation::simulate_run(loaded.task, loaded.space, *store, options);
  }
  int runs() const { return runs_; }

 private:
  const memory::Knowledge& seed_;
  fs::path scratch_;
  int steps_;
  bool cold_defaults_;
  double eta_;
  int proposals_;
  int runs_ = 0;
};

// Per task, the horizon every arm's curve is read over: the longest search among its runs.
std::map<std::string, double> horizons(const std::vector<RunOutcome>& runs) {
  std::map<std::string, double> h;
  for (const RunOutcome& r : runs) h[r.task] = std::max(h[r.task], std::max(r.search_device_s, 1e-9));
  return h;
}

// One run's measure `what`: final, auc, device_to_best, candidates_to_best, device or gap.
double value(const RunOutcome& r, const std::map<std::string, double>& horizon,
             const std::string& what) {
  if (what == "final") return r.final_speedup;
  if (what == "auc") return simulation::curve_area(r.curve, horizon.at(r.task));
  if (what == "device_to_best") return std::max(r.device_s_to_best, 1e-6);
  if (what == "candidates_to_best") return std::max(r.candidates_to_best, 1);
  if (what == "device") return std::max(r.search_device_s, 1e-6);
  if (what == "gap") return r.final_speedup / r.space_best_speedup;
  throw Error("simulate: no measure '" + what + "'");
}

std::vector<double> field(const std::vector<RunOutcome>& runs, const std::string& arm,
                          const std::map<std::string, double>& horizon, const std::string& what) {
  std::vector<double> values;
  for (const RunOutcome& r : runs) {
    if (r.arm == arm) values.push_back(value(r, horizon, what));
  }
  return values;
}

// Geomean over tasks and seeds of arm a's `what` over arm b's, each run of a divided by b's run
// of the same task and seed (paired: the tasks' scales differ by orders of magnitude, so a ratio
// of pooled geomeans with each side resampled apart has an interval as wide as that spread), with
// a 95% percentile-bootstrap interval over the pairs. `significant`: the interval excludes 1.
// Only the tasks in `task` (all when empty).
nlohmann::json paired_ratio_ci(const std::vector<RunOutcome>& runs, const std::string& a,
                               const std::string& b, const std::map<std::string, double>& horizon,
                               const std::string& what, uint64_t seed,
                               const std::string& task = "") {
  std::map<std::pair<std::string, uint64_t>, double> of_b;
  for (const RunOutcome& r : runs) {
    if (r.arm == b && (task.empty() || r.task == task)) of_b[{r.task, r.seed}] = value(r, horizon, what);
  }
  std::vector<double> logs;
  for (const RunOutcome& r : runs) {
    if (r.arm != a || (!task.empty() && r.task != task)) continue;
    const auto other = of_b.find({r.task, r.seed});
    if (other != of_b.end()) {
      logs.push_back(std::log(std::max(value(r, horizon, what), 1e-12) /
                              std::max(other->second, 1e-12)));
    }
  }
  if (logs.empty()) return nullptr;
  const auto [point, low, high] = exp_mean_ci(logs, seed);
  return {{"ratio", point}, {"ci_low", low}, {"ci_high", high}, {"pairs", logs.size()},
          {"significant", low > 1.0 || high < 1.0}};
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Issue 21's policy, transfer and ladder experiments over measured spaces"};
  std::string spaces_dir, out, table, transfer_a, transfer_b;
  std::string arms_list = "htam,flat,feedback,random,oneshot,htam-prefix,htam-hierarchy,"
                          "htam-local-memory";
  std::string commit;
  int seeds = 10, steps = 6, proposals = 3;
  double eta = 3.0;
  bool cold_defaults = false;
  app.add_option("--spaces", spaces_dir, "folder of space files (*.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--seeds", seeds, "seeds per arm and task")->capture_default_str();
  app.add_option("--steps", steps, "search steps per run")->capture_default_str();
  app.add_option("--arms", arms_list, "policy arms (comma-separated)")->capture_default_str();
  app.add_option("--transfer-a", transfer_a, "families of the A set, in order");
  app.add_option("--transfer-b", transfer_b, "families of the B set");
  app.add_option("--out", out, "JSON to write")->required();
  app.add_option("--table", table, "markdown table to write");
  app.add_flag("--cold-defaults", cold_defaults,
               "start each decomposition's hint at a random point, not the family's defaults "
               "(simulation::SimulatedRunOptions::cold_defaults)");
  app.add_option("--proposals", proposals, "candidates generated per step (a ladder cohort)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--eta", eta,
                 "the ladder's successive-halving ratio: the top ceil(n / eta) of a cohort "
                 "reach rung 2 (scheduler.h; > 1)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& text) {
            const double value = std::strtod(text.c_str(), nullptr);
            return value > 1.0 && std::isfinite(value)
                       ? std::string()
                       : "eta must be a number > 1 (the top ceil(n / eta) are promoted), got " +
                             text;
          },
          "> 1"));
  app.add_option("--commit", commit, "kforge's commit, recorded in the JSON and the table");
  CLI11_PARSE(app, argc, argv);
  try {
    std::map<std::string, Loaded> spaces;  // by family
    for (const auto& entry : fs::directory_iterator(spaces_dir)) {
      if (entry.path().extension() != ".json") continue;
      simulation::SpaceRecord space = simulation::load_space(entry.path().string());
      // A space names its task as it was measured, relative to the repository's root
      // (bench/tasks/...): found from there when the command runs elsewhere.
      fs::path task_path = space.task_path;
      if (task_path.is_relative() && !fs::exists(task_path)) {
        task_path = fs::path(resource_root()) / task_path;
      }
      Task task = load_task(task_path.string());
      const std::string family = space.family;
      spaces.emplace(family, Loaded{std::move(space), std::move(task)});
    }
    if (spaces.empty()) throw Error(spaces_dir + ": no space files (*.json)");
    const memory::Knowledge seed =
        memory::load_knowledge(fs::path(resource_root()) / "knowledge" / "seed.toml");
    ScratchDir scratch("kforge-simulate");
    Runner runner(seed, scratch.path(), steps, cold_defaults, eta, proposals);
    const fs::path memory = fs::path(scratch.path()) / "memory.sqlite";
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    // The machine that simulated (the spaces record the one that measured).
    const std::string host = std::getenv("HOSTNAME") ? std::getenv("HOSTNAME") : "";
    nlohmann::json report = {{"date", date},
                             {"commit", commit},
                             {"host", host},
                             {"seeds", seeds},
                             {"steps", steps},
                             {"eta", eta},
                             {"proposals", proposals},
                             {"cold_defaults", cold_defaults},
                             {"spaces", nlohmann::json::array()}};
    for (const auto& [family, loaded] : spaces) {
      const simulation::PointRecord* best = loaded.space.best();
      report["spaces"].push_back(
          {{"family", family}, {"task", loaded.space.task}, {"points", loaded.space.points.size()},
           {"device", loaded.space.device}, {"measured_at", loaded.space.measured_at},
           {"best", best ? best->id : ""},
           {"best_speedup", best ? *best->full_geomean_speedup : 1.0}});
    }

    // 1. Policy arms, fresh memory each run.
    const std::vector<std::string> arms = split(arms_list);
    std::vector<RunOutcome> policy_runs;
    for (const auto& [family, loaded] : spaces) {
      for (const std::string& arm : arms) {
        for (int s = 1; s <= seeds; ++s) {
          runner.fresh(memory);
          policy_runs.push_back(runner.run(loaded, arm, uint64_t(s), memory));
        }
      }
      std::cerr << "policies: " << family << " done\n";
    }
    const std::map<std::string, double> horizon = horizons(policy_runs);
    nlohmann::json policies = nlohmann::json::object();
    for (const std::string& arm : arms) {
      policies[arm] = {
          {"final_speedup", geomean_ci(field(policy_runs, arm, horizon, "final"), 11)},
          {"gap_to_space_best", geomean_ci(field(policy_runs, arm, horizon, "gap"), 12)},
          {"auc", geomean_ci(field(policy_runs, arm, horizon, "auc"), 13)},
          {"device_s_to_best", geomean_ci(field(policy_runs, arm, horizon, "device_to_best"), 14)},
          {"candidates_to_best",
           geomean_ci(field(policy_runs, arm, horizon, "candidates_to_best"), 15)},
          {"htam_over_this_final",
           paired_ratio_ci(policy_runs, "htam", arm, horizon, "final", 16)},
          {"htam_over_this_auc", paired_ratio_ci(policy_runs, "htam", arm, horizon, "auc", 17)}};
    }
    report["policies"] = policies;

    // 2. Transfer: B from a fresh memory vs from A's.
    nlohmann::json transfer = nullptr;
    if (!transfer_a.empty() && !transfer_b.empty()) {
      std::vector<RunOutcome> fresh_runs, transferred;
      const fs::path memory_a = fs::path(scratch.path()) / "memory-a.sqlite";
      for (const std::string policy : {"htam", "flat"}) {
        for (int s = 1; s <= seeds; ++s) {
          runner.fresh(memory_a);
          for (const std::string& family : split(transfer_a)) {
            if (!spaces.count(family)) throw Error("--transfer-a: no space for " + family);
            runner.run(spaces.at(family), policy, uint64_t(s), memory_a);
          }
          for (const std::string& family : split(transfer_b)) {
            if (!spaces.count(family)) throw Error("--transfer-b: no space for " + family);
            runner.fresh(memory);
            RunOutcome fresh = runner.run(spaces.at(family), policy, uint64_t(s) + 1000, memory);
            fs::copy_file(memory_a, memory, fs::copy_options::overwrite_existing);
            RunOutcome from_a = runner.run(spaces.at(family), policy, uint64_t(s) + 1000, memory);
            fresh.arm = policy + "/fresh";
            from_a.arm = policy + "/from-A";
            fresh_runs.push_back(fresh);
            transferred.push_back(from_a);
          }
        }
      }
      std::vector<RunOutcome> all = fresh_runs;
      all.insert(all.end(), transferred.begin(), transferred.end());
      const std::map<std::string, double> h = horizons(all);
      transfer = {{"a", transfer_a}, {"b", transfer_b}};
      for (const std::string policy : {"htam", "flat"}) {
        const std::string f = policy + "/fresh", t = policy + "/from-A";
        transfer[policy] = {
            {"fresh_over_transfer_device_s_to_best",
             paired_ratio_ci(all, f, t, h, "device_to_best", 21)},
            {"fresh_over_transfer_candidates_to_best",
             paired_ratio_ci(all, f, t, h, "candidates_to_best", 22)},
            {"transfer_over_fresh_final", paired_ratio_ci(all, t, f, h, "final", 23)},
            {"transfer_over_fresh_auc", paired_ratio_ci(all, t, f, h, "auc", 24)}};
      }
      report["transfer_runs"] = nlohmann::json::array();
      for (const RunOutcome& r : all) report["transfer_runs"].push_back(outcome_json(r, h.at(r.task)));
    }
    report["transfer"] = transfer;

    // 3. Ladder vs full fidelity (htam, fresh memory).
    std::vector<RunOutcome> fidelity_runs;
    for (const auto& [family, loaded] : spaces) {
      for (const std::string arm : {"htam", "full:htam"}) {
        for (int s = 1; s <= seeds; ++s) {
          runner.fresh(memory);
          fidelity_runs.push_back(runner.run(loaded, arm, uint64_t(s), memory));
        }
      }
    }
    const std::map<std::string, double> hf = horizons(fidelity_runs);
    nlohmann::json ladder = {
        {"ladder_over_full_device_s",
         paired_ratio_ci(fidelity_runs, "htam", "full:htam", hf, "device", 31)},
        {"ladder_over_full_device_s_to_best",
         paired_ratio_ci(fidelity_runs, "htam", "full:htam", hf, "device_to_best", 33)},
        {"ladder_over_full_final",
         paired_ratio_ci(fidelity_runs, "htam", "full:htam", hf, "final", 32)},
        {"tasks", nlohmann::json::object()}};
    for (const auto& [family, loaded] : spaces) {
      const std::string& task = loaded.space.task;
      ladder["tasks"][task] = {
          {"ladder_over_full_device_s",
           paired_ratio_ci(fidelity_runs, "htam", "full:htam", hf, "device", 34, task)},
          {"ladder_over_full_final",
           paired_ratio_ci(fidelity_runs, "htam", "full:htam", hf, "final", 35, task)}};
    }
    report["ladder"] = ladder;
    report["fidelity_runs"] = nlohmann::json::array();
    for (const RunOutcome& r : fidelity_runs) report["fidelity_runs"].push_back(outcome_json(r, hf.at(r.task)));
    report["policy_runs"] = nlohmann::json::array();
    for (const RunOutcome& r : policy_runs) report["policy_runs"].push_back(outcome_json(r, horizon.at(r.task)));
    report["simulated_runs"] = runner.runs();
    write_file_atomically(out, report.dump(1) + "\n");
    std::cout << fmt::format("{} simulated runs; wrote {}\n", runner.runs(), out);
    if (!table.empty()) {
      // Each space names its device: a folder may hold spaces measured on different cards.
      std::string measured_on;
      for (const auto& [family, loaded] : spaces) {
        measured_on += fmt::format("{}{} on {}", measured_on.empty() ? "" : ", ",
                                   loaded.space.task, loaded.space.device);
      }
      std::string md = fmt::format("Simulated {} ({} seeds, {} steps{}{}{}) at commit {} over "
                                   "spaces measured as follows: {}.\n\n",
                                   date, seeds, steps,
                                   proposals != 3 ? fmt::format(", {} proposals a step", proposals)
                                                  : "",
                                   eta != 3.0 ? fmt::format(", eta {:g}", eta) : "",
                                   cold_defaults ? ", hints at random points (--cold-defaults)" : "",
                                   commit.empty() ? "?" : commit, measured_on) +
                       "| arm | final speedup (geomean, 95% CI) | gap to space best | AUC | htam/arm final | htam/arm AUC |\n|---|---|---|---|---|---|\n";
      const auto cell = [](const nlohmann::json& j, const char* key) {
        return j.is_null() ? std::string("-")
                           : fmt::format("{:.3f} [{:.3f}, {:.3f}]", j[key].get<double>(),
                                         j["ci_low"].get<double>(), j["ci_high"].get<double>());
      };
      for (const std::string& arm : arms) {
        const nlohmann::json& p = policies[arm];
        md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", arm, cell(p["final_speedup"], "geomean"),
                          cell(p["gap_to_space_best"], "geomean"), cell(p["auc"], "geomean"),
                          cell(p["htam_over_this_final"], "ratio"), cell(p["htam_over_this_auc"], "ratio"));
      }
      const auto ratio = [&cell](const nlohmann::json& j) {
        return cell(j, "ratio") + (!j.is_null() && j["significant"].get<bool>() ? " (significant)" : "");
      };
      md += "\nRatios are geomeans over (task, seed) pairs, each run against the same task and seed "
            "of the other arm.\n\n| ladder over full fidelity | ratio [95% CI] |\n|---|---|\n";
      md += fmt::format("| search device seconds | {} |\n| device seconds to the best | {} |\n"
                        "| final speedup | {} |\n",
                        ratio(ladder["ladder_over_full_device_s"]),
                        ratio(ladder["ladder_over_full_device_s_to_best"]),
                        ratio(ladder["ladder_over_full_final"]));
      for (const auto& [task, t] : ladder["tasks"].items()) {
        md += fmt::format("| {}: device seconds / final | {} / {} |\n", task,
                          ratio(t["ladder_over_full_device_s"]), ratio(t["ladder_over_full_final"]));
      }
      if (!transfer.is_null()) {
        md += fmt::format("\nTransfer (A = {}, B = {}), from A's memory against fresh:\n\n"
                          "| policy | fresh/from-A device s to best | from-A/fresh final | from-A/fresh AUC |\n"
                          "|---|---|---|---|\n",
                          transfer_a, transfer_b);
        for (const std::string policy : {"htam", "flat"}) {
          const nlohmann::json& t = transfer[policy];
          md += fmt::format("| {} | {} | {} | {} |\n", policy,
                            ratio(t["fresh_over_transfer_device_s_to_best"]),
                            ratio(t["transfer_over_fresh_final"]), ratio(t["transfer_over_fresh_auc"]));
        }
      }
      write_file_atomically(table, md);
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "kforge_bench_simulate: error: " << e.what() << "\n";
    return 1;
  }
}

// HTAM on a synthetic optimization landscape (issue 4's benchmark; not a test).
//
// The landscape: D directions with S strategies each. Applying strategy s of direction d right
// after direction p (and p2 two steps earlier) has a hidden expected log gain
//   mu(p2, p, d, s) = base[d][s] + lag1[p][d] + lag2[p2][d]
// and fails (a compile error, no gain) with probability fail[d][s]. The observed gain is mu plus
// Gaussian noise (sd 0.05). base is small and mostly negative (most changes do not pay on their
// own); lag1 gives each direction two good successors (+0.15..+0.30) and one bad one (-0.15);
// lag2 adds a weaker second-order effect (+0.10 for one direction two steps later). Landscape
// "flat" sets lag1 = lag2 = 0, so only base differs: there is no transition structure to learn.
//
// A "task" is T steps from value 0; an ok attempt with a positive observed gain is accepted
// (value += gain), as the optimizer keeps a faster candidate. Memory (one in-memory SQLite store
// per policy and seed, the real SqliteStore and the real policies) persists across the tasks of a
// seed, so policies that learn get better task after task. Per task we record:
//   best    the final value (sum of accepted gains, a log speedup)
//   regret  sum over steps of max_{d',s'} E[gain | prefix] - E[gain of the chosen move | prefix],
//           E[gain] = (1 - fail) * mu: the expected loss against an oracle that knows the
//           landscape, from the policy's own prefix
//
//   kforge_bench_htam_landscape [--seeds N] [--tasks N] [--steps T] [--json FILE] [--md FILE]
//                               [--commit SHA]
#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "memory/baselines.h"
#include "memory/sqlite_store.h"

using namespace kforge;
using nlohmann::json;

namespace {

constexpr int kDirections = 8;
constexpr int kStrategies = 4;
constexpr double kNoiseSd = 0.05;

struct Landscape {
  double base[kDirections][kStrategies];
  double fail[kDirections][kStrategies];
  double lag1[kDirections + 1][kDirections];  // row kDirections: no previous direction
  double lag2[kDirections + 1][kDirections];

  double expected(int p2, int p, int d, int s) const {
    return (1.0 - fail[d][s]) * (base[d][s] + lag1[p][d] + lag2[p2][d]);
  }
};

double uniform(std::mt19937_64& rng, double low, double high) {
  return low + (high - low) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

double gaussian(std::mt19937_64& rng) {  // Box-Muller, portable
  double u1 = std::max(uniform(rng, 0.0, 1.0), 1e-300), u2 = uniform(rng, 0.0, 1.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

Landscape make_landscape(uint64_t seed, bool structured) {
  std::mt19937_64 rng(seed * 7919 + 17);
  Landscape l{};
  for (int d = 0; d < kDirections; ++d) {
    for (int s = 0; s < kStrategies; ++s) {
      l.base[d][s] = uniform(rng, -0.08, 0.04);
      l.fail[d][s] = uniform(rng, 0.0, 0.2);
    }
  }
  if (!structured) return l;
  for (int p = 0; p <= kDirections; ++p) {
    std::vector<int> order(kDirections);
    for (int d = 0; d < kDirections; ++d) order[d] = d;
    for (int i = kDirections - 1; i > 0; --i) {
      std::swap(order[i], order[static_cast<int>(rng() % static_cast<uint64_t>(i + 1))]);
    }
    l.lag1[p][order[0]] = uniform(rng, 0.15, 0.30);
    l.lag1[p][order[1]] = uniform(rng, 0.15, 0.30);
    l.lag1[p][order[2]] = -0.15;
    l.lag2[p][order[3]] = 0.10;
  }
  return l;
}

std::string direction_id(int d) { return "d" + std::to_string(d); }

memory::Knowledge knowledge() {
  memory::Knowledge k;
  k.version = 1;
  for (int d = 0; d < kDirections; ++d) {
    memory::Direction direction;
    direction.id = direction_id(d);
    direction.title = "direction " + std::to_string(d);
    direction.backends = {"cuda"};
    k.directions.push_back(direction);
    for (int s = 0; s < kStrategies; ++s) {
      memory::Strategy strategy;
      strategy.id = direction.id + "_s" + std::to_string(s);
      strategy.direction_id = direction.id;
      strategy.backends = {"cuda"};
      k.strategies.push_back(strategy);
    }
  }
  return k;  // no priors, no edges: everything must be learned
}

struct TaskResult {
  double best = 0.0;
  double regret = 0.0;
};

TaskResult run_task(memory::SearchPolicy& policy, memory::Store& store, const Landscape& l,
                    int task, int steps, std::mt19937_64& rng) {
  memory::StateSummary state;
  state.context = {"cuda", "synthetic", "0.0", "none", "landscape", "task" + std::to_string(task)};
  TaskResult result;
  std::vector<int> chosen;
  auto any = [](const memory::Strategy&) { return true; };
  for (int step = 1; step <= steps; ++step) {
    state.step = step;
    const int p = chosen.empty() ? kDirections : chosen.back();
    const int p2 = chosen.size() < 2 ? kDirections : chosen[chosen.size() - 2];
    std::optional<memory::PolicyChoice> choice = policy.choose(state, any, rng);
    const int d = std::stoi(choice->direction.id.substr(1));
    const int s = choice->strategy.id.back() - '0';
    double oracle = -1e9;
    for (int dd = 0; dd < kDirections; ++dd) {
      for (int ss = 0; ss < kStrategies; ++ss) oracle = std::max(oracle, l.expected(p2, p, dd, ss));
    }
    result.regret += oracle - l.expected(p2, p, d, s);

    memory::Evidence evidence;
    evidence.direction_id = choice->direction.id;
    evidence.strategy_id = choice->strategy.id;
    evidence.prefix.assign(state.prefix.rbegin(), state.prefix.rend());
    evidence.provenance = state.context;
    const bool failed = uniform(rng, 0.0, 1.0) < l.fail[d][s];
    double gain = l.base[d][s] + l.lag1[p][d] + l.lag2[p2][d] + kNoiseSd * gaussian(rng);
    evidence.verdict = failed ? "compile_error" : "ok";
    if (!failed) evidence.log_gain = gain;
    evidence.diagnosis = state.last_feedback.summary();
    store.record(evidence);
    if (!failed && gain > 0.0) result.best += gain;

    state.last_feedback = {};
    state.last_feedback.verdict = evidence.verdict;
    state.last_feedback.log_gain = evidence.log_gain;
    state.last_direction_id = choice->direction.id;
    state.prefix.push_back(choice->direction.id);
    chosen.push_back(d);
  }
  return result;
}

struct Arm {
  std::string name;
  memory::PolicyKind kind;
  memory::Ablations ablations;
  double temperature = 0.5;  // kforge's default
};

struct Summary {
  std::vector<double> best_per_seed, regret_per_seed, late_best_per_seed;
};

double mean(const std::vector<double>& v) {
  double total = 0.0;
  for (double x : v) total += x;
  return v.empty() ? 0.0 : total / static_cast<double>(v.size());
}

double ci95(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  double m = mean(v), ss = 0.0;
  for (double x : v) ss += (x - m) * (x - m);
  return 1.96 * std::sqrt(ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
}

std::string machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown cpu";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname name{};
  uname(&name);
  return model + ", " + name.sysname + " " + name.release;
}

std::string arg(int argc, char** argv, const std::string& flag, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == flag) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = std::stoi(arg(argc, argv, "--seeds", "30"));
  const int tasks = std::stoi(arg(argc, argv, "--tasks", "20"));
  const int steps = std::stoi(arg(argc, argv, "--steps", "6"));
  const std::string json_path = arg(argc, argv, "--json", "");
  const std::string md_path = arg(argc, argv, "--md", "");
  const std::string commit = arg(argc, argv, "--commit", "unknown");
  const std::vector<Arm> arms = {
      {"htam", memory::PolicyKind::htam, {}},
      {"flat", memory::PolicyKind::flat, {}},
      {"feedback", memory::PolicyKind::feedback, {}},
      {"random", memory::PolicyKind::random, {}},
      {"htam -prefix", memory::PolicyKind::htam, {false, false, true}},
      {"htam -hierarchy", memory::PolicyKind::htam, {true, false, false}},
      {"htam -local-memory", memory::PolicyKind::htam, {false, true, false}},
      {"htam T=0.1", memory::PolicyKind::htam, {}, 0.1},
      {"flat T=0.1", memory::PolicyKind::flat, {}, 0.1},
  };
  const memory::Knowledge seed_knowledge = knowledge();
  auto started = std::chrono::steady_clock::now();
  json landscapes = json::object();
  for (bool structured : {true, false}) {
    std::map<std::string, Summary> summaries;
    for (int seed = 1; seed <= seeds; ++seed) {
      const Landscape landscape = make_landscape(static_cast<uint64_t>(seed), structured);
      for (const Arm& arm : arms) {
        auto store = memory::SqliteStore::open(":memory:", seed_knowledge);
        memory::PolicyConfig config;
        config.ablations = arm.ablations;
        config.temperature = arm.temperature;
        auto policy = memory::make_search_policy(arm.kind, *store, config);
        std::mt19937_64 rng(static_cast<uint64_t>(seed) * 1000003);
        double best = 0.0, regret = 0.0, late = 0.0;
        for (int task = 0; task < tasks; ++task) {
          TaskResult r = run_task(*policy, *store, landscape, task, steps, rng);
          best += r.best;
          regret += r.regret;
          if (task >= tasks / 2) late += r.best;
        }
        Summary& summary = summaries[arm.name];
        summary.best_per_seed.push_back(best / tasks);
        summary.regret_per_seed.push_back(regret / tasks);
        summary.late_best_per_seed.push_back(late / (tasks - tasks / 2));
      }
    }
    json rows = json::array();
    for (const Arm& arm : arms) {
      const Summary& s = summaries[arm.name];
      int wins = 0;
      for (int i = 0; i < seeds; ++i)
        wins += s.best_per_seed[i] > summaries["flat"].best_per_seed[i];
      rows.push_back({{"policy", arm.name},
                      {"best_mean", mean(s.best_per_seed)},
                      {"best_ci95", ci95(s.best_per_seed)},
                      {"late_best_mean", mean(s.late_best_per_seed)},
                      {"regret_mean", mean(s.regret_per_seed)},
                      {"regret_ci95", ci95(s.regret_per_seed)},
                      {"seeds_better_than_flat", wins}});
    }
    landscapes[structured ? "transition" : "flat"] = rows;
  }
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json result = {
      {"benchmark", "htam_landscape"},
      {"machine", machine()},
      {"date", date},
      {"commit", commit},
      {"seeds", seeds},
      {"tasks_per_seed", tasks},
      {"steps_per_task", steps},
      {"directions", kDirections},
      {"strategies_per_direction", kStrategies},
      {"noise_sd", kNoiseSd},
      {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
      {"landscapes", landscapes}};
  std::string text = result.dump(2) + "\n";
  if (json_path.empty()) {
    std::cout << text;
  } else {
    std::ofstream(json_path) << text;
  }
  if (!md_path.empty()) {
    std::ofstream md(md_path);
    md << fmt::format(
        "| landscape | policy | best per task (log speedup) | 95% CI | best, 2nd "
        "half of tasks | regret per task | 95% CI | seeds better than flat |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& [name, rows] : landscapes.items()) {
      for (const json& row : rows) {
        md << fmt::format("| {} | {} | {:.3f} | ±{:.3f} | {:.3f} | {:.3f} | ±{:.3f} | {}/{} |\n",
                          name, row["policy"].get<std::string>(), row["best_mean"].get<double>(),
                          row["best_ci95"].get<double>(), row["late_best_mean"].get<double>(),
                          row["regret_mean"].get<double>(), row["regret_ci95"].get<double>(),
                          row["seeds_better_than_flat"].get<int>(), seeds);
      }
    }
  }
  return 0;
}

// Measures the evaluation plane against the targets of its issue, on a real device:
//   spread   repeated measurement of one >= 50 us kernel: IQR / median per request (< 2%);
//   a/a      a kernel compared with itself by the acceptance test: tie rate (>= 95%);
//   slower   a kernel made 5% slower (5% more bytes): detected-as-slower rate (>= 95%);
//   cost     gate + quick timing of a softmax candidate at KernelBench's 23_Softmax shape
//            (4096 x 393216 fp32), per rung: compile, reference, input generation, checks,
//            timing (<= 10 s), and the full ladder (<= 30 s).
// Prints one JSON object.
//
//   kforge_bench_evaluation [--backend cuda|cpu] [--trials N] [--skip-cost]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "backends/backend.h"
#include "common/paths.h"
#include "compile/toolchain_compiler.h"
#include "evaluation/evaluator.h"
#include "task/task_loader.h"
#include "worker/worker_client.h"

namespace fs = std::filesystem;
using namespace kforge;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * (values.size() - 1);
  const size_t low = static_cast<size_t>(position);
  const size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (position - low) * (values[high] - values[low]);
}

compile::Artifact build(compile::Compiler& compiler, const std::string& backend,
                        const fs::path& source, std::map<std::string, std::string> defines = {}) {
  compile::CompileJob job;
  job.backend = backend;
  job.source = read_file(source);
  job.source_name = source.filename().string();
  job.defines = std::move(defines);
  compile::Artifact artifact = compiler.compile(job);
  if (artifact.verdict != Verdict::ok) throw Error("building " + source.string() + ":\n" + artifact.log);
  return artifact;
}

worker::ProcessWorkerConfig worker_config(const std::string& backend, bool measure) {
  worker::ProcessWorkerConfig config;
  config.worker_path = worker_binary_path();
  config.backend = backend;
  config.measure_device = measure;
  return config;
}

/// Copy task: x[n] -> y[n], a gate workload and a timed one of 2^26 floats (256 MiB each way).
Task copy_task() {
  Task task;
  task.name = "copy";
  task.source_path = "copy (built in)";
  task.signature.tensors = {{"x", TensorRole::input, DType::f32, {"n"}},
                            {"y", TensorRole::output, DType::f32, {"n"}}};
  task.workloads = {{"tail", {{"n", 4097}}, false}, {"big", {{"n", int64_t{1} << 26}}, true}};
  task.tolerance = Tolerance{0, 0, std::nullopt};
  task.distributions = {"uniform", "normal"};
  return task;
}

json timing_quality(compile::Compiler& compiler, const std::string& backend, int trials) {
  const fs::path kernel = fs::path(resource_root()) / "bench" / "kernels" / "copy.cu";
  Task task = copy_task();
  worker::ProcessWorker candidates(worker_config(backend, false));
  worker::ProcessWorker reference(worker_config(backend, true));
  evaluation::EvaluationPolicy policy;
  evaluation::Evaluator evaluator(candidates, reference, task, policy);
  evaluator.prepare(build(compiler, backend, kernel));
  const int a = evaluator.evaluate(build(compiler, backend, kernel)).handle;
  const int a2 = candidates.load({build(compiler, backend, kernel).path}, 60).handle;
  const evaluation::CandidateEvaluation slower_eval =
      evaluator.evaluate(build(compiler, backend, kernel, {{"KF_EXTRA_READ_PERCENT", "7"}}));
  if (a < 0 || slower_eval.verdict != Verdict::ok) throw Error("copy kernels failed the gate");
  const int slower = slower_eval.handle;

  json result;
  // Spread: the full-rung policy, repeated.
  std::vector<double> spreads, medians;
  for (int i = 0; i < 10; ++i) {
    worker::TimeRequest request;
    request.handle = a;
    request.signature = task.signature;
    request.workload = task.workloads[1];
    request.seed = 100 + i;
    request.policy = policy.full;
    const worker::TimeResult timing = candidates.time(request, 300);
    if (timing.verdict != Verdict::ok) throw Error("timing failed: " + timing.message);
    const double median = quantile(timing.samples_ms, 0.5);
    spreads.push_back((quantile(timing.samples_ms, 0.75) - quantile(timing.samples_ms, 0.25)) / median);
    medians.push_back(median);
  }
  result["spread"] = {{"kernel_median_ms", quantile(medians, 0.5)},
                      {"iqr_over_median", spreads},
                      {"worst", *std::max_element(spreads.begin(), spreads.end())},
                      {"target", "< 0.02"}};
  // A/A and 5%-slower acceptance decisions.
  int ties = 0, detected = 0;
  std::vector<double> aa_ratios, slower_ratios;
  for (int t = 0; t < trials; ++t) {
    const auto aa_outcome = evaluator.compare(a, a2);
    const auto ab_outcome = evaluator.compare(a, slower);
    const auto& aa = aa_outcome.paired;
    const auto& ab = ab_outcome.paired;
    if (!aa || !ab) {
      throw Error("a comparison failed to time: " + aa_outcome.message + ab_outcome.message);
    }
    ties += aa->outcome == evaluation::PairedComparison::Outcome::tie;
    detected += ab->outcome == evaluation::PairedComparison::Outcome::slower;
    aa_ratios.push_back(aa->speedup.speedup);
    slower_ratios.push_back(ab->speedup.speedup);
  }
  result["a_a"] = {{"trials", trials}, {"ties", ties}, {"tie_rate", double(ties) / trials},
                   {"ratios", aa_ratios}, {"target", ">= 0.95"}};
  result["five_percent_slower"] = {{"trials", trials}, {"detected", detected},
                                   {"detection_rate", double(detected) / trials},
                                   {"ratios", slower_ratios}, {"target", ">= 0.95"}};
  result["device"] = evaluator.device();
  return result;
}

json evaluation_cost(compile::Compiler& compiler, const std::string& backend) {
  const fs::path root = resource_root();
  const Task task = load_task((root / "bench" / "tasks" / "softmax_kernelbench" / "task.toml").string());
  json cost;
  auto start = Clock::now();
  worker::ProcessWorker candidates(worker_config(backend, false));
  worker::ProcessWorker reference(worker_config(backend, true));
  evaluation::Evaluator evaluator(candidates, reference, task, evaluation::EvaluationPolicy{});
  candidates.device_info();
  cost["workers_start_s"] = seconds_since(start);

  start = Clock::now();
  compile::Artifact reference_artifact = build(compiler, backend, task.reference_paths.at(backend));
  cost["compile_reference_s"] = seconds_since(start);
  start = Clock::now();
  evaluation::TaskReport report = evaluator.prepare(reference_artifact);
  cost["prepare_reference_s"] = seconds_since(start);
  cost["task_warnings"] = report.warnings;

  start = Clock::now();
  const compile::Artifact candidate = build(
      compiler, backend, root / "kernels" / backend / "softmax" / "block_per_row.cu");
  const double compile_s = seconds_since(start);
  start = Clock::now();
  const evaluation::CandidateEvaluation outcome = evaluator.evaluate(candidate);
  const double evaluate_s = seconds_since(start);
  cost["candidate"] = {{"compile_s", compile_s},
                       {"gate_and_quick_s", evaluate_s},
                       {"verdict", to_string(outcome.verdict)},
                       {"message", outcome.message},
                       {"rungs", outcome.rungs}};
  if (outcome.verdict != Verdict::ok) return cost;
  start = Clock::now();
  const evaluation::FullRung full = evaluator.full_rung(outcome.handle);
  cost["full_rung_s"] = seconds_since(start);
  cost["full_rung_speedup"] = full.geomean_speedup;
  start = Clock::now();
  const auto paired = evaluator.time_paired(outcome.handle);
  cost["final_rung_s"] = seconds_since(start);
  cost["final_speedup"] =
      evaluation::judge_paired(paired.reference_rounds, paired.candidate_rounds, 0.95, 0.01).speedup;
  cost["ladder_s"] = compile_s + evaluate_s + cost["full_rung_s"].get<double>() +
                     cost["final_rung_s"].get<double>();
  cost["quick_median_ms"] = outcome.timing.median_ms;
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cuda";
  int trials = 40;
  bool skip_cost = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (arg == "--trials" && i + 1 < argc) trials = std::stoi(argv[++i]);
    else if (arg == "--skip-cost") skip_cost = true;
    else {
      std::cerr << "usage: kforge_bench_evaluation [--backend cuda] [--trials N] [--skip-cost]\n";
      return 2;
    }
  }
  try {
    const fs::path cache = fs::temp_directory_path() / "kforge-bench-evaluation-cache";
    fs::remove_all(cache);  // compile times are measured cold
    compile::ToolchainOptions options;
    options.cache_dir = cache.string();
    options.include_dirs = kernel_include_dirs();
    compile::ToolchainCompiler compiler(options, &backends::toolchain_for);
    json result;
    const auto start = Clock::now();
    result["timing_quality"] = timing_quality(compiler, backend, trials);
    result["timing_quality_s"] = seconds_since(start);
    if (!skip_cost) result["cost_kernelbench_softmax"] = evaluation_cost(compiler, backend);
    std::cout << result.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kforge_bench_evaluation: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

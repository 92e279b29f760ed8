// Measures a task's whole built-in space once (issue 21; simulation/space.h): every variant x
// parameter point of its family built, gated, quick-timed and, when correct, timed at rung 2 on
// every timed workload, through the same evaluation plane `kforge optimize` uses (real workers,
// real compiler). The file is rewritten after each point, and --resume skips the points it
// already holds, so a space too large for one device call is measured over several.
//
//   kforge_bench_measure_space --task examples/softmax/task.toml --backend cpu \
//       --out bench/search/spaces/cpu/softmax.json [--resume] [--max-points N] [--max-s S]
//       [--jobs N]
// Exit 0 when the file holds every point, 3 when points remain (run again with --resume), 1 on
// an error (the task, the family, the reference or the toolchain: the message says which).
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/epilogue.h"
#include "cli/optimize_command.h"
#include "cli/reference_check.h"
#include "common/error.h"
#include "common/paths.h"
#include "compile/compile_pool.h"
#include "compile/toolchain_compiler.h"
#include "backends/backend.h"
#include "generation/templates_generator.h"
#include "simulation/space.h"
#include "task/task_loader.h"

namespace fs = std::filesystem;
using namespace kforge;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// One point, built already (`artifact`), through rungs 0-2.
simulation::PointRecord measure_point(const generation::Proposal& proposal,
                                      const generation::TemplateVariant& variant,
                                      const compile::Artifact& artifact,
                                      cli::PreparedReference& prepared) {
  simulation::PointRecord record;
  const generation::TemplatePoint& point = proposal.point;
  record.id = point.id();
  record.job_key = simulation::job_key(proposal.job);
  record.variant = variant.name;
  record.decomposition = variant.decomposition;
  record.params = point.params;
  record.compile_s = artifact.compile_s;
  if (artifact.verdict != Verdict::ok) {
    record.verdict = artifact.verdict;
    record.message = artifact.log.substr(0, 2000);
    return record;
  }
  evaluation::Evaluator& evaluator = prepared.evaluator();
  const evaluation::CandidateEvaluation outcome = evaluator.evaluate(artifact, prepared.candidates());
  for (const evaluation::RungRecord& rung : outcome.rungs) {
    (rung.rung == Rung::gate ? record.gate_s : record.quick_s) += rung.seconds;
  }
  record.verdict = outcome.verdict;
  record.message = outcome.message.substr(0, 2000);
  record.quick_samples_ms = outcome.samples_ms;
  if (outcome.verdict != Verdict::ok) return record;
  // The timed workloads' gate cases, deferred from rung 0 (the policy's defer_timed_gate, as
  // kforge optimize's ladder runs them), timed apart so that a replay can charge them at rung 0
  // (full fidelity) or at the first deciding rung (the ladder).
  const evaluation::EvaluationPlane::FullSizeGate gate =
      evaluator.gate_at_full_size(outcome.handle, prepared.candidates());
  record.gate_full_size_s = gate.seconds;
  if (gate.verdict != Verdict::ok) {
    record.verdict = gate.verdict;
    record.message = gate.message.substr(0, 2000);
    record.gate_full_size_failed = true;
    return record;
  }
  const auto started = std::chrono::steady_clock::now();
  const evaluation::FullRung full = evaluator.full_rung(outcome.handle, prepared.candidates());
  record.full_s = seconds_since(started);
  if (full.verdict != Verdict::ok) {
    record.verdict = full.verdict;
    record.message = "rung 2: " + full.message.substr(0, 2000);
    return record;
  }
  for (const evaluation::FullRung::Entry& entry : full.workloads) {
    record.full.push_back({entry.workload, entry.candidate.samples_ms, entry.reference_median_ms});
  }
  record.full_geomean_speedup = full.geomean_speedup;
  return record;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure a task's whole built-in search space once, for simulated search runs"};
  std::string task_path, backend = "auto", out, cache_dir, cuda_arch = "sm_90", commit;
  int device = 0, max_points = 0, jobs = 0;
  double max_s = 0.0;
  bool resume = false;
  app.add_option("--task", task_path, "the task (task.toml or a PyTorch problem .py)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--backend", backend, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--device", device, "the device index");
  app.add_option("--out", out, "the space file (JSON) to write")->required();
  app.add_flag("--resume", resume, "keep the points --out already holds and measure the rest");
  app.add_option("--max-points", max_points, "stop after measuring this many new points (0: all)");
  app.add_option("--max-s", max_s, "stop before a new point once this many seconds have passed");
  app.add_option("--cache-dir", cache_dir, "build cache (default: kforge's)")
      ->envname("KFORGE_CACHE_DIR");
  app.add_option("--cuda-arch", cuda_arch, "nvcc -arch")->capture_default_str();
  app.add_option("--commit", commit, "kforge's commit, recorded in the file");
  app.add_option("--jobs", jobs, "parallel builds (0: hardware threads); every build of this "
                 "invocation finishes before the first timing, so compilers never share the "
                 "machine with a timed kernel");
  CLI11_PARSE(app, argc, argv);
  const auto started = std::chrono::steady_clock::now();
  try {
    const Task task = load_task(task_path);
    const std::string resolved = cli::resolve_backend(backend, device, nullptr);
    const std::string dtype = to_string(element_dtype(task));
    const generation::KernelFamily family = generation::for_dtype(
        generation::load_family((fs::path(resource_root()) / "kernels").string(), resolved,
                                task.family),
        dtype);
    generation::TemplatesGenerator generator(family, dtype);
    generator.set_task_defines(task_defines(task));

    simulation::SpaceRecord space;
    if (resume && fs::exists(out)) {
      space = simulation::load_space(out);
      if (space.task_hash != task_hash(task) || space.backend != resolved) {
        throw Error(out + ": holds another task or backend (" + space.task + ", " +
                    space.backend + "); --resume continues the same one");
      }
      if (!space.points.empty() && !space.deferred_timed_gate) {
        throw Error(out + ": its points were measured with the timed workloads' gate cases in "
                    "rung 0 (before they were deferred); measure the space again into another "
                    "--out");
      }
    }
    cli::ReferenceCheckOptions reference;
    reference.backend = resolved;
    reference.device = device;
    reference.cache_dir = cache_dir;
    reference.cuda_arch = cuda_arch;
    // Measured as kforge optimize's ladder evaluates: the timed workloads' gate cases apart
    // from rung 0 (measure_point times them on their own).
    evaluation::EvaluationPolicy policy;
    policy.defer_timed_gate = true;
    // The workers first: a resumed space measured on another card is refused before the
    // reference is built and timed (tens of seconds), from the reference worker's device.
    cli::ReferenceWorkers workers(resolved, device);
    const std::string device_name = workers.plane(task).reference->device_info().name;
    if (!space.points.empty() && !space.device.empty() && space.device != device_name) {
      // Speedups over the reference differ from card to card: one space, one device.
      throw Error(out + ": its " + std::to_string(space.points.size()) +
                  " points were measured on " + space.device + ", this device is " +
                  device_name + "; --resume continues on the same device (or measure into "
                  "another --out)");
    }
    cli::PreparedReference prepared(task, reference, workers, policy);
    compile::ToolchainOptions toolchain;
    toolchain.cache_dir = cache_dir.empty() ? artifact_cache_dir() : cache_dir;
    toolchain.include_dirs = kernel_include_dirs();
    toolchain.cuda_arch = cuda_arch;
    compile::ToolchainCompiler compiler(toolchain, &backends::toolchain_for);

    space.task = task.name;
    space.task_path = task_path;
    space.task_hash = task_hash(task);
    space.family = task.family;
    space.backend = resolved;
    space.dtype = dtype;
    space.device = device_name;
    space.toolchain = compiler.toolchain(resolved);
    space.measured_at = utc_now();
    if (!commit.empty()) space.commit = commit;
    space.timed_workload = prepared.check().timed_workload;
    space.deferred_timed_gate = true;
    const auto reference_started = std::chrono::steady_clock::now();
    const evaluation::TimingVerdict reference_timing = prepared.evaluator().time_reference();
    space.reference_quick_s = seconds_since(reference_started);
    space.reference_quick_samples_ms = reference_timing.samples_ms;

    const std::vector<generation::TemplatePoint> points = simulation::all_points(family);
    // The points still to measure, all built first (in parallel) and then timed one by one.
    std::vector<generation::Proposal> pending;
    for (const generation::TemplatePoint& point : points) {
      generation::Proposal proposal = generator.make_proposal(point);
      if (space.find(simulation::job_key(proposal.job)) != nullptr) continue;
      if (max_points > 0 && static_cast<int>(pending.size()) >= max_points) break;
      pending.push_back(std::move(proposal));
    }
    std::vector<compile::Artifact> built;
    {
      compile::CompilePool pool(compiler, jobs);
      std::vector<std::future<compile::Artifact>> futures;
      for (const generation::Proposal& proposal : pending) {
        futures.push_back(pool.submit(proposal.job));
      }
      for (std::future<compile::Artifact>& future : futures) built.push_back(future.get());
    }
    std::cerr << fmt::format("built {} points in {:.1f} s\n", pending.size(),
                             seconds_since(started));
    int measured = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (max_s > 0.0 && seconds_since(started) > max_s) break;
      const generation::Proposal& proposal = pending[i];
      space.points.push_back(measure_point(proposal, *family.variant(proposal.point.variant),
                                           built[i], prepared));
      ++measured;
      const simulation::PointRecord& done = space.points.back();
      std::cerr << fmt::format("[{}/{}] {}: {}{}\n", space.points.size(), points.size(), done.id,
                               to_string(done.verdict),
                               done.full_geomean_speedup
                                   ? fmt::format(" {:.3f}x", *done.full_geomean_speedup)
                                   : std::string());
      simulation::save_space(space, out);
    }
    simulation::save_space(space, out);
    const simulation::PointRecord* best = space.best();
    std::cout << fmt::format("{}: {} of {} points measured ({} new) in {:.1f} s; best {}\n", out,
                             space.points.size(), points.size(), measured, seconds_since(started),
                             best ? fmt::format("{} {:.3f}x", best->id,
                                                *best->full_geomean_speedup)
                                  : std::string("none"));
    return space.points.size() == points.size() ? 0 : 3;
  } catch (const Error& e) {
    std::cerr << "kforge_bench_measure_space: error: " << e.what() << "\n";
    return 1;
  }
}

#include "cli/verify_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// "0.1.0" -> {0, 1, 0}; what does not parse counts as 0.
std::vector<int> version_parts(const std::string& version) {
  std::vector<int> parts;
  std::stringstream stream(version);
  for (std::string part; std::getline(stream, part, '.');) {
    try {
      parts.push_back(std::stoi(part));
    } catch (const std::exception&) {
      parts.push_back(0);
    }
  }
  return parts;
}

nlohmann::json read_json_of(const fs::path& path, const std::string& run_dir, const char* what) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const std::exception& e) {
    throw Error(run_dir + ": " + what + " " + path.string() + " is not readable JSON: " + e.what());
  }
}

// The task to verify against: the run's bundle (its references beside it), else, for a run from
// before bundles, the run's own task.toml, whose references must still be where they were.
fs::path task_of(const fs::path& run) {
  if (fs::exists(run / "bundle" / "task.toml")) return run / "bundle" / "task.toml";
  if (fs::exists(run / "task.toml")) return run / "task.toml";
  throw Error(run.string() + ": no bundle/task.toml and no task.toml: the run does not carry its "
              "task");
}

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

RecordedClaim read_claim(const std::string& run_dir) {
  const fs::path run(run_dir);
  if (!fs::is_directory(run) || !fs::exists(run / "run.json")) {
    throw Error(run_dir + ": not a kforge run directory (expected run.json there)");
  }
  const nlohmann::json info = read_json_of(run / "run.json", run_dir, "run.json");
  const std::string made_by = info.value("kforge_version", "");
  if (version_parts(made_by) > version_parts(KFORGE_VERSION)) {
    throw Error(fmt::format("{}: made by kforge {}, newer than this kforge {}; verify it with "
                            "kforge {} or newer",
                            run_dir, made_by, KFORGE_VERSION, made_by));
  }
  if (!fs::exists(run / "result.json")) {
    throw Error(run_dir + ": the run did not finish (no result.json); `kforge optimize --resume " +
                run_dir + "` finishes it");
  }
  const nlohmann::json result = read_json_of(run / "result.json", run_dir, "result.json");
  if (!result.contains("best") || result.at("best").is_null()) {
    throw Error(run_dir + ": the run found no correct candidate; there is no claim to verify");
  }
  if (!result.contains("final") || result.at("final").is_null()) {
    throw Error(run_dir + ": the run's final timing was skipped; there is no measured speedup to "
                "verify");
  }
  RecordedClaim claim;
  try {
    claim.task = result.value("task", info.value("task", ""));
    claim.best = result.at("best").value("id", "");
    claim.backend = result.value("backend", info.value("backend", ""));
    claim.device = result.contains("device") && result.at("device").is_object()
                       ? result.at("device").value("name", "")
                       : "";
    claim.toolchain = result.value("toolchain", "");
    claim.finished = info.value("started", "");
    const nlohmann::json& speedup = result.at("final").at("speedup");
    claim.speedup = speedup.at("speedup").get<double>();
    claim.ci_low = speedup.at("ci_low").get<double>();
    claim.ci_high = speedup.at("ci_high").get<double>();
    claim.level = speedup.value("level", 0.95);
    claim.reference_median_ms = result.at("final").at("reference").value("median_ms", 0.0);
    claim.best_median_ms = result.at("final").at("best").value("median_ms", 0.0);
  } catch (const nlohmann::json::exception& e) {
    throw Error(run_dir + ": result.json: /final is not a final timing kforge wrote: " + e.what());
  }
  return claim;
}

std::pair<std::string, std::string> judge_verification(const RecordedClaim& recorded,
                                                        const KernelEvaluation& here) {
  if (!here.correct()) {
    return {"failed", fmt::format("the best is not correct here: {} at {}: {}",
                                  to_string(here.verdict), here.failed_at, here.message)};
  }
  const std::string numbers = fmt::format(
      "{:.3f}x [{:.3f}, {:.3f}] here against {:.3f}x [{:.3f}, {:.3f}] recorded",
      here.speedup.speedup, here.speedup.ci_low, here.speedup.ci_high, recorded.speedup,
      recorded.ci_low, recorded.ci_high);
  if (here.speedup.ci_low > recorded.ci_high) {
    return {"faster_here", numbers + ": the intervals do not overlap; faster here"};
  }
  if (here.speedup.ci_high < recorded.ci_low) {
    return {"slower_here", numbers + ": the intervals do not overlap; slower here"};
  }
  return {"reproduced", numbers + ": the intervals overlap"};
}

void add_verify_command(CLI::App& app, VerifyCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "verify", "Re-check a finished run's claim here: rebuild its best, gate it on fresh seeds, "
                "time it against the reference, and compare with the recorded speedup");
  command->add_option("run_dir", options.run_dir, "a finished run directory")->required();
  command->add_option("--backend", options.backend,
                      "cpu or cuda (default: the run's own backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--seed", options.seed,
                      "the gate's base seed (default: a fresh random one, printed)");
  options.measurement.profile = "off";
  add_measurement_options(*command, options.measurement);
  command->add_flag("--json", options.json, "print the verification as JSON");
}

int run_verify_command(const VerifyCommandOptions& options) {
  Verification v;
  v.run_dir = fs::absolute(options.run_dir).lexically_normal().string();
  v.recorded = read_claim(options.run_dir);
  const fs::path run(options.run_dir);
  EvalCommandOptions eval = options.measurement;
  eval.task_path = task_of(run).string();
  eval.backend = options.backend.empty() ? v.recorded.backend : options.backend;
  // A run of ModelNew candidates (--language cuda|triton) has best.py, which `kforge eval`
  // runs in a Python candidate worker; else the backend's native kernel.
  eval.kernel_path =
      fs::exists(run / "best.py")
          ? (run / "best.py").string()
          : (run / ("best" + backends::get_backend(v.recorded.backend).source_extension)).string();
  if (!fs::exists(eval.kernel_path)) {
    throw Error(options.run_dir + ": the best kernel " + eval.kernel_path + " is missing");
  }
  const Task task = with_context(options.run_dir, [&] { return load_task(eval.task_path); });
  evaluation::EvaluationPolicy policy;
  v.seed = options.seed.value_or(fresh_seed());
  policy.gate.base_seed = v.seed;
  v.here = evaluate_kernel(task, eval, policy);
  std::tie(v.verdict, v.explanation) = judge_verification(v.recorded, v.here);
  if (options.json) {
    std::cout << to_json(v).dump(2) << "\n";
  } else {
    std::cout << render_verification(v);
  }
  const bool held = v.verdict == "reproduced" || v.verdict == "faster_here";
  return static_cast<int>(held ? ExitCode::ok : ExitCode::not_all_correct);
}

nlohmann::json to_json(const Verification& v) {
  const RecordedClaim& r = v.recorded;
  return {{"run_dir", v.run_dir},
          {"verdict", v.verdict},
          {"explanation", v.explanation},
          {"seed", v.seed},
          {"recorded",
           {{"task", r.task}, {"best", r.best}, {"backend", r.backend}, {"device", r.device},
            {"toolchain", r.toolchain}, {"started", r.finished}, {"speedup", r.speedup},
            {"ci_low", r.ci_low}, {"ci_high", r.ci_high}, {"level", r.level},
            {"reference_median_ms", r.reference_median_ms},
            {"best_median_ms", r.best_median_ms}}},
          {"here", to_json(v.here)}};
}

std::string render_verification(const Verification& v) {
  const RecordedClaim& r = v.recorded;
  const KernelEvaluation& h = v.here;
  std::string text = fmt::format("kforge verify: {} (task '{}', best {})\n", v.run_dir, r.task,
                                 r.best);
  text += fmt::format("  recorded: {:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x), best {:.4f} ms, reference "
                      "{:.4f} ms, on {} ({}), {}, run of {}\n",
                      r.speedup, r.level * 100, r.ci_low, r.ci_high, r.best_median_ms,
                      r.reference_median_ms, r.backend, r.device, r.toolchain, r.finished);
  if (h.correct()) {
    text += fmt::format("  here:     {:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x), best {:.4f} ms, reference "
                        "{:.4f} ms, on {} ({}), {}\n",
                        h.speedup.speedup, h.speedup.level * 100, h.speedup.ci_low,
                        h.speedup.ci_high, h.kernel_final.median_ms, h.reference_final.median_ms,
                        h.reference.backend, h.reference.report.device.name, h.toolchain);
  }
  text += fmt::format("  gate on fresh inputs: base seed {}\n", v.seed);
  text += "  verdict: " + v.verdict + ": " + v.explanation + "\n";
  return text;
}

}  // namespace kforge::cli

// The views of `kforge eval`'s result (eval_command.h): JSON for scripts and the console summary.
#include <fmt/format.h>

#include "cli/eval_command.h"

namespace kforge::cli {
namespace {

// Seconds building the kernel: the compiler's, plus a Python candidate's import in its worker
// (where load_inline compiles).
double build_seconds(const KernelEvaluation& e) {
  return e.artifact.compile_s + (e.quick ? e.quick->worker_build_s : 0.0);
}

}  // namespace

nlohmann::json to_json(const KernelEvaluation& e) {
  nlohmann::json j = {{"kernel", e.kernel},
                      {"task", e.reference.task},
                      {"backend", e.reference.backend},
                      {"device", e.reference.report.device.name},
                      {"toolchain", e.toolchain},
                      {"verdict", to_string(e.verdict)},
                      {"correct", e.correct()},
                      {"message", e.message},
                      {"failed_at", e.failed_at},
                      {"reference", to_json(e.reference)},
                      {"wall_s", e.wall_s}};
  j["compile"] = e.artifact.key.empty() && e.artifact.log.empty()
                     ? nlohmann::json()
                     : nlohmann::json{{"key", e.artifact.key},
                                      {"from_cache", e.artifact.from_cache},
                                      {"compile_s", e.artifact.compile_s},
                                      {"log", e.artifact.log}};
  // A Python candidate builds in its worker (load_inline at import): compile time, apart from
  // the gate's.
  if (e.quick && j["compile"].is_object()) {
    j["compile"]["worker_build_s"] = e.quick->worker_build_s;
    j["compile"]["compile_s"] = build_seconds(e);
  }
  j["rungs"] = e.quick ? nlohmann::json(e.quick->rungs) : nlohmann::json();
  j["quick"] = e.quick && e.quick->verdict == Verdict::ok
                   ? nlohmann::json{{"median_ms", e.quick->timing.median_ms},
                                    {"samples_ms", e.quick->samples_ms}}
                   : nlohmann::json();
  if (e.quick && e.quick->quick_reference) j["quick"]["reference"] = *e.quick->quick_reference;
  if (e.full) {
    nlohmann::json workloads = nlohmann::json::array();
    for (const auto& w : e.full->workloads) {
      workloads.push_back({{"workload", w.workload},
                           {"median_ms", w.candidate.summary.median_ms},
                           {"reference_median_ms", w.reference_median_ms},
                           {"speedup", w.speedup}});
    }
    j["full"] = {{"verdict", to_string(e.full->verdict)},
                 {"geomean_speedup", e.full->geomean_speedup},
                 {"workloads", workloads}};
  } else {
    j["full"] = nullptr;
  }
  if (e.correct()) {
    const double seconds = e.kernel_final.median_ms * 1e-3;
    j["final"] = {{"reference_median_ms", e.reference_final.median_ms},
                  {"kernel_median_ms", e.kernel_final.median_ms},
                  {"reference", e.reference_final},
                  {"kernel", e.kernel_final},
                  {"speedup", e.speedup.speedup},
                  {"ci_low", e.speedup.ci_low},
                  {"ci_high", e.speedup.ci_high},
                  {"level", e.speedup.level},
                  {"achieved_gbps", seconds > 0 && e.reference.bytes_per_call > 0
                                        ? nlohmann::json(e.reference.bytes_per_call / seconds * 1e-9)
                                        : nlohmann::json()}};
  } else {
    j["final"] = nullptr;
  }
  j["profile"] = e.profile ? e.profile->to_json() : nlohmann::json();
  return j;
}

std::string render_kernel_evaluation(const KernelEvaluation& e) {
  const auto& device = e.reference.report.device;
  std::string text = fmt::format("kforge eval: {} against '{}' on {}:{} ({})\n", e.kernel,
                                 e.reference.task, e.reference.backend, device.device_index,
                                 device.name);
  text += fmt::format("  reference on '{}': {:.4f} ms (quick timing)\n",
                      e.reference.timed_workload, e.reference.timing.summary.median_ms);
  if (!e.correct()) {
    text += fmt::format("  verdict: {} at {}\n", to_string(e.verdict), e.failed_at);
    text += "  " + e.message + "\n";
  } else {
    text += fmt::format("  verdict: ok (gate passed: {} cases, max normalized error {:.3g})\n",
                        e.quick->gate.cases_checked, e.quick->gate.max_normalized_error);
    if (const auto& window = e.quick->quick_reference) {
      text += fmt::format("  quick timing (rung 1): {:.4f} ms, {:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x, "
                          "{}) over the reference timed in rounds between its own ({:.4f} ms)\n",
                          e.quick->timing.median_ms, window->speedup.speedup,
                          window->speedup.level * 100, window->speedup.ci_low,
                          window->speedup.ci_high, to_string(window->outcome), window->median_ms);
    }
    if (e.full && e.full->workloads.size() > 1) {
      std::string each;
      for (const auto& w : e.full->workloads) {
        each += fmt::format("{}{} {:.3f}x", each.empty() ? "" : ", ", w.workload, w.speedup);
      }
      text += fmt::format("  every timed workload (rung 2): geomean {:.3f}x ({})\n",
                          e.full->geomean_speedup, each);
    }
    text += fmt::format(
        "  speedup: {:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x) over the reference on '{}' (final "
        "rung, interleaved rounds): kernel {:.4f} ms, reference {:.4f} ms\n",
        e.speedup.speedup, e.speedup.level * 100, e.speedup.ci_low, e.speedup.ci_high,
        e.reference.timed_workload, e.kernel_final.median_ms, e.reference_final.median_ms);
    if (e.reference.bytes_per_call > 0 && e.kernel_final.median_ms > 0) {
      text += fmt::format("  achieved: {:.1f} GB/s of the minimum traffic\n",
                          e.reference.bytes_per_call / (e.kernel_final.median_ms * 1e-3) * 1e-9);
    }
    if (e.profile) {
      if (!e.profile->ok) {
        text += "  profile: none: " + e.profile->message + "\n";
      } else {
        for (const std::string& line : e.profile->diagnosis) text += "  profile: " + line + "\n";
      }
    }
  }
  for (const std::string& warning : e.reference.report.warnings) {
    text += "  warning: " + warning + "\n";
  }
  for (const std::string& note : e.reference.notes) text += "  note: " + note + "\n";
  if (const double build_s = build_seconds(e); build_s > 0) {
    text += fmt::format("  {:.1f} s in all, of which {:.1f} s building the kernel{}\n", e.wall_s,
                        build_s, e.quick && e.quick->worker_build_s > 0
                                     ? " (importing the Python candidate in its worker)"
                                     : "");
  } else {
    text += fmt::format("  {:.1f} s in all\n", e.wall_s);
  }
  return text;
}

}  // namespace kforge::cli

#include "report/summary.h"

#include "backends/backend.h"
#include "report/lineage_text.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace kforge::report {
namespace {

std::string device_line(const nlohmann::json& result) {
  const nlohmann::json& device = result.at("device");
  std::string name = device.value("name", "?");
  const backends::Backend* backend = backends::find_backend(result.value("backend", ""));
  if (backend != nullptr && backend->can.compute_capability) {
    name += " (sm " + device.value("compute_capability", "?") + ")";
  }
  return fmt::format("{} on {}, {}", result.value("backend", "?"), name,
                     result.value("toolchain", "?"));
}

std::string ms(const nlohmann::json& value) {
  return value.is_number() ? fmt::format("{:.4f}", value.get<double>()) : "-";
}

// "steps 6/6, wall 12.3 s (max 60), device 4.1 s, candidates 21, cost $0.0000; stopped by steps"
std::string budget_line(const nlohmann::json& result) {
  const auto budget = result.find("budget");
  if (budget == result.end() || !budget->is_object() || !budget->contains("spent")) return "";
  const nlohmann::json& spent = budget->at("spent");
  const nlohmann::json& limits = budget->at("limits");
  auto of = [&](const char* key) {
    const nlohmann::json& limit = limits.value(key, nlohmann::json());
    return limit.is_number() ? " (max " + limit.dump() + ")" : std::string();
  };
  return fmt::format(
      "steps {}/{}, wall {:.1f} s{}, device {:.1f} s{}, candidates {}{}, cost ${:.4f}{}; "
      "stopped by {}",
      spent.value("steps", 0), limits.value("steps", 0), spent.value("wall_s", 0.0),
      of("max_wall_s"), spent.value("device_s", 0.0), of("max_device_s"),
      spent.value("candidates", 0), of("max_candidates"), spent.value("cost_usd", 0.0),
      of("max_cost_usd"), budget->value("stopped_by", "?"));
}

double number_or(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

/// "kernelbench 37.67x, llm 0.03x" from the best's rung-2 speedups, and the names of the timed
/// workloads where it is slower than the reference; empty when rung 2 has fewer than 2 entries.
std::pair<std::string, std::string> workload_lines(const nlohmann::json& best) {
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& each =
      best.contains("full_workload_speedups") ? best["full_workload_speedups"] : none;
  if (!each.is_array() || each.size() < 2) return {};
  std::string all, slower;
  for (const auto& w : each) {
    const std::string name = w.value("workload", "?");
    const double speedup = w.value("speedup", 0.0);
    all += fmt::format("{}{} {:.2f}x", all.empty() ? "" : ", ", name, speedup);
    if (speedup < 1.0) {
      slower += fmt::format("{}{} ({:.2f}x)", slower.empty() ? "" : ", ", name, speedup);
    }
  }
  return {all, slower};
}

/// "2 wrong_answer, 1 worker_crashed": the verdicts of the candidates, most frequent first (a
/// candidate that passed the gate and then crashed or timed out while being timed shows as such,
/// not as failing the gate).
std::string verdict_counts(const nlohmann::json& candidates) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& c : candidates) {
    const std::string verdict = c.value("verdict", "?");
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& entry) { return entry.first == verdict; });
    if (it == counts.end()) {
      counts.emplace_back(verdict, 1);
    } else {
      ++it->second;
    }
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (const auto& [verdict, n] : counts) {
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, verdict);
  }
  return text.empty() ? "none was evaluated" : text;
}

/// verdict_counts, plus the proposals the generator could not write (a model's reply without
/// code, a failed request), which never became candidates.
std::string why_no_candidate(const nlohmann::json& result) {
  std::string text = verdict_counts(result.at("candidates"));
  const int unwritten = result.value("generation_failures", 0);
  if (unwritten > 0) {
    text += fmt::format("; {} proposal{} the generator could not write", unwritten,
                        unwritten == 1 ? "" : "s");
  }
  return text;
}

/// What makes the best kernel a poor outcome, one line each: slower than the reference at the
/// final rung (its whole confidence interval below 1x), the reference itself (the llm generator's
/// starting point), an LLM that never answered. Empty when none applies.
std::vector<std::string> outcome_warnings(const nlohmann::json& result) {
  std::vector<std::string> lines;
  const auto final = result.find("final");
  if (final != result.end() && final->is_object() && final->contains("speedup")) {
    const nlohmann::json& speedup = final->at("speedup");
    const double high = speedup.value("ci_high", 0.0);
    if (high > 0.0 && high < 1.0) {
      lines.push_back(fmt::format(
          "the best is slower than the reference ({:.2f}x, the whole {:.0f}% CI below 1x): "
          "keep the reference",
          speedup.value("speedup", 0.0), 100 * speedup.value("level", 0.95)));
    }
  }
  if (const auto compile = result.find("compile_baseline");
      compile != result.end() && compile->is_object() &&
      !compile->value("drift_warning", "").empty()) {
    lines.push_back(compile->value("drift_warning", ""));
  }
  if (result.at("best").value("id", "") == "reference-seed") {
    lines.push_back("the best is the task's reference itself: no generated kernel was correct "
                    "and faster");
  }
  if (const auto llm = result.find("llm"); llm != result.end() && llm->is_object()) {
    const int answers = llm->value("requests", 0);
    const int failures = llm->value("failures", 0);
    if (answers == 0 && failures > 0) {
      lines.push_back(fmt::format(
          "the LLM endpoint answered none of {} requests (the errors are in the console, "
          "events.jsonl and llm/): check its address and key",
          failures));
    }
  }
  return lines;
}

/// --baseline compile: how the best compares with torch.compile of the reference, one sentence
/// ("1.40x [95% CI 1.30x .. 1.50x]; torch.compile 0.8000 ms median, compiled in 23.4 s (not in
/// any sample)"), or why there is no such number. Empty under --baseline eager. `x` formats a
/// speedup ("{:.2f}x" on the console, "{:.3f}x" in report.md).
std::string compile_sentence(const nlohmann::json& result, const char* x) {
  const auto found = result.find("compile_baseline");
  if (found == result.end() || !found->is_object()) return "";
  const nlohmann::json& compile = *found;
  const std::string status = compile.value("status", "");
  const nlohmann::json none;
  const nlohmann::json& speedup = compile.contains("best_speedup") ? compile["best_speedup"] : none;
  auto times = [&](double value) { return fmt::format(fmt::runtime(x), value); };
  if (speedup.is_object()) {
    std::string text = fmt::format("{} [{:.0f}% CI {} .. {}]", times(speedup.value("speedup", 0.0)),
                                   100 * speedup.value("level", 0.95),
                                   times(speedup.value("ci_low", 0.0)),
                                   times(speedup.value("ci_high", 0.0)));
    if (status == "cached") {
      const nlohmann::json& cached = compile.at("cached");
      return text + fmt::format(
                        "; through torch.compile's {} over eager cached from {} (run {}), "
                        "compiled then in {:.1f} s",
                        times(cached.at("over_eager").value("speedup", 0.0)),
                        cached.value("measured_at", "?"), cached.value("run_dir", "?"),
                        cached.value("compile_s", 0.0));
    }
    const nlohmann::json& final = compile.contains("final") ? compile["final"] : none;
    return text + fmt::format("; torch.compile {} ms median ({} over eager), compiled in "
                              "{:.1f} s (not in any sample)",
                              ms(final.is_object() ? final.value("median_ms", nlohmann::json())
                                                   : nlohmann::json()),
                              compile.contains("over_eager") && compile["over_eager"].is_object()
                                  ? times(compile["over_eager"].value("speedup", 0.0))
                                  : "-",
                              compile.value("compile_s", 0.0));
  }
  if (status == "failed" || status == "not_applicable") {
    return "none: " + compile.value("message", "");
  }
  return "none: the final rung did not time it";
}

}  // namespace

std::string render_console_summary(const nlohmann::json& result, const std::string& task_name) {
  std::string text = fmt::format("kforge: {} optimized with {} in {:.1f} s\n", task_name,
                                 device_line(result), result.value("wall_s", 0.0));
  int ok = 0;
  int duplicates = 0;  // same as an earlier candidate: not evaluated again, not counted here
  for (const auto& c : result.at("candidates")) {
    const bool duplicate = c.contains("duplicate_of") && c["duplicate_of"].is_string();
    duplicates += duplicate;
    ok += !duplicate && c.value("verdict", "") == "ok";
  }
  text += fmt::format("  candidates: {} evaluated, {} correct{}{}\n",
                      result.at("candidates").size() - static_cast<size_t>(duplicates), ok,
                      duplicates > 0 ? fmt::format(", {} duplicate{} of earlier ones not "
                                                   "evaluated again",
                                                   duplicates, duplicates == 1 ? "" : "s")
                                     : "",
                      result.value("replayed_candidates", 0) > 0
                          ? fmt::format(" ({} restored from the run database)",
                                        result.value("replayed_candidates", 0))
                          : "");
  // Said only where it is not the plain default: the rule applied, or the user relaxed it.
  if (const std::string precision = result.value("precision", "");
      !precision.empty() && precision != "fp32") {
    text += "  precision:  " + precision +
            (precision == "fp32 (precision rule)"
                 ? ": correct means within a few times plain fp32's error (no TF32 or bf16 arithmetic)\n"
                 : ": reduced-precision arithmetic accepted by the task\n");
  }
  if (const std::string budget = budget_line(result); !budget.empty()) {
    text += "  budget:     " + budget + "\n";
  }
  if (result.at("best").is_null()) {
    text += fmt::format("  no correct candidate ({}); nothing to report as faster\n",
                        why_no_candidate(result));
    const std::string stopped = result.value("stopped_early", "");
    return stopped.empty() ? text : text + "  stopped:    " + stopped + "\n";
  }
  if (result.value("final", nlohmann::json()).is_null()) {
    return text + fmt::format("  best:       {} (final timing skipped: continue with kforge "
                              "optimize --resume {})\n",
                              result.at("best").value("id", "?"), result.value("run_dir", "?"));
  }
  const nlohmann::json& final = result.at("final");
  const nlohmann::json& speedup = final.at("speedup");
  text += fmt::format("  best:       {}\n", result.at("best").value("id", "?"));
  text += fmt::format(
      "  reference:  {} ms   best: {} ms   (medians of {} paired samples)\n",
      ms(final.at("reference").at("median_ms")), ms(final.at("best").at("median_ms")),
      final.at("best").value("count", 0));
  text += fmt::format("  speedup:    {:.2f}x  [{:.0f}% CI {:.2f}x .. {:.2f}x]\n",
                      speedup.value("speedup", 0.0), 100 * speedup.value("level", 0.95),
                      speedup.value("ci_low", 0.0), speedup.value("ci_high", 0.0));
  if (const std::string compile = compile_sentence(result, "{:.2f}x"); !compile.empty()) {
    text += "  vs compile: " + compile + "\n";
  }
  for (const std::string& line : outcome_warnings(result)) text += "  warning:    " + line + "\n";
  if (const auto [all, slower] = workload_lines(result.at("best")); !all.empty()) {
    text += fmt::format("  workloads:  {} (rung 2, geomean {:.2f}x)\n", all,
                        number_or(result.at("best"), "full_geomean_speedup"));
    if (!slower.empty()) {
      text += "  warning:    slower than the reference on " + slower +
              ": the speedup above is the primary timed workload's only\n";
    }
  }
  text += fmt::format("  bandwidth:  {:.1f} GB/s achieved ({:.1f} GB/s reference), {:.1f} MB moved per call\n",
                      final.value("achieved_gbps", 0.0), final.value("reference_gbps", 0.0),
                      static_cast<double>(result.value("bytes_moved", int64_t{0})) / 1e6);
  if (const auto profile = result.find("profile"); profile != result.end() && profile->is_object()) {
    if (profile->value("ok", false)) {
      for (const auto& line : profile->at("diagnosis")) {
        text += fmt::format("  profile:    {}\n", line.get<std::string>());
      }
    } else {
      text += fmt::format("  profile:    none ({})\n", profile->value("message", ""));
    }
  }
  const std::vector<std::string> lineage =
      lineage_lines(result.at("best").value("lineage", nlohmann::json()));
  for (size_t i = 0; i < lineage.size(); ++i) {
    text += (i == 0 ? "  lineage:    " : "              ") + lineage[i] + "\n";
  }
  text += fmt::format("  kernel:     {}\n", result.at("best").value("source", "?"));
  text += fmt::format("  report:     {}/report.md\n  result:     {}/result.json\n",
                      result.value("run_dir", "?"), result.value("run_dir", "?"));
  return text;
}

std::string render_markdown(const nlohmann::json& result, const std::string& task_name) {
  std::string text = fmt::format("# kforge run: {}\n\n", task_name);
  text += fmt::format("- backend and device: {}\n", device_line(result));
  text += fmt::format("- wall time: {:.1f} s\n", result.value("wall_s", 0.0));
  text += fmt::format("- bytes moved per call (timed workload): {}\n", result.value("bytes_moved", int64_t{0}));
  if (const std::string budget = budget_line(result); !budget.empty()) {
    text += "- budget spent: " + budget + "\n";
  }
  if (!result.at("best").is_null() && result.value("final", nlohmann::json()).is_null()) {
    text += fmt::format("- best so far: `{}`; the final timing was skipped (Ctrl-C twice)\n",
                        result.at("best").value("id", "?"));
  } else if (!result.at("best").is_null()) {
    const nlohmann::json& final = result.at("final");
    const nlohmann::json& speedup = final.at("speedup");
    text += fmt::format("- best: `{}` ({})\n", result.at("best").value("id", "?"),
                        result.at("best").value("source", "?"));
    text += "\n| | median ms | min ms | max ms | samples | GB/s |\n|---|---|---|---|---|---|\n";
    text += fmt::format("| reference | {} | {} | {} | {} | {:.1f} |\n",
                        ms(final["reference"]["median_ms"]), ms(final["reference"]["min_ms"]),
                        ms(final["reference"]["max_ms"]), final["reference"].value("count", 0),
                        final.value("reference_gbps", 0.0));
    if (final.contains("compile") && final["compile"].is_object()) {
      const nlohmann::json& compiled = final["compile"];
      text += fmt::format("| torch.compile | {} | {} | {} | {} | - |\n", ms(compiled["median_ms"]),
                          ms(compiled["min_ms"]), ms(compiled["max_ms"]),
                          compiled.value("count", 0));
    }
    text += fmt::format("| best | {} | {} | {} | {} | {:.1f} |\n\n", ms(final["best"]["median_ms"]),
                        ms(final["best"]["min_ms"]), ms(final["best"]["max_ms"]),
                        final["best"].value("count", 0), final.value("achieved_gbps", 0.0));
    text += fmt::format("Speedup {:.3f}x, {:.0f}% bootstrap CI [{:.3f}, {:.3f}] (reference and best "
                        "timed in interleaved rounds).\n",
                        speedup.value("speedup", 0.0), 100 * speedup.value("level", 0.95),
                        speedup.value("ci_low", 0.0), speedup.value("ci_high", 0.0));
    if (const std::string compile = compile_sentence(result, "{:.3f}x"); !compile.empty()) {
      text += "\nOver torch.compile of the reference: " + compile + ".\n";
    }
    for (const std::string& line : outcome_warnings(result)) {
      text += "\n**Warning:** " + line + ".\n";
    }
    if (const auto [all, slower] = workload_lines(result.at("best")); !all.empty()) {
      text += fmt::format("\nEvery timed workload (rung 2): {}; geomean {:.3f}x.\n", all,
                          number_or(result.at("best"), "full_geomean_speedup"));
      if (!slower.empty()) {
        text += "**Slower than the reference on " + slower +
                "**: the speedup above is the primary timed workload's only.\n";
      }
    }
    if (const auto profile = result.find("profile"); profile != result.end() && profile->is_object()) {
      text += fmt::format("\n## Profile of the best (Nsight Compute, workload '{}')\n\n",
                          profile->value("workload", ""));
      if (profile->value("ok", false)) {
        for (const auto& line : profile->at("diagnosis")) {
          text += "- " + line.get<std::string>() + "\n";
        }
      } else {
        text += "Not profiled: " + profile->value("message", "") + "\n";
      }
    }
  } else {
    text += fmt::format("\nNo correct candidate ({}).\n", why_no_candidate(result));
    if (const std::string stopped = result.value("stopped_early", ""); !stopped.empty()) {
      text += "Stopped: " + stopped + ".\n";
    }
  }
  if (!result.at("best").is_null()) {
    const std::vector<std::string> lineage =
        lineage_lines(result.at("best").value("lineage", nlohmann::json()));
    if (!lineage.empty()) {
      text += "\n## Lineage of the best\n\nThe moves that led to the best and what the memory "
              "had for each when it was chosen:\n\n";
      for (const std::string& line : lineage) text += "- " + line + "\n";
    }
  }
  text += "\n## Candidates\n\n| # | step | candidate | direction / strategy | verdict | median ms | "
          "gain vs parent |\n|---|---|---|---|---|---|---|\n";
  for (const auto& c : result.at("candidates")) {
    std::string how = c.value("strategy", "").empty()
                          ? std::string("expert hint")
                          : c.value("direction", "") + " / " + c.value("strategy", "");
    std::string gain = c["log_gain"].is_number()
                           ? fmt::format("{:.3f}x", std::exp(c["log_gain"].get<double>()))
                           : "-";
    std::string verdict = c.value("verdict", "");
    if (c.contains("duplicate_of") && c["duplicate_of"].is_string()) {
      verdict += fmt::format(" (same as #{})", c.value("duplicate_of_index", -1));
    }
    text += fmt::format("| {} | {} | `{}` | {} | {} | {} | {} |\n", c.value("index", 0),
                        c.value("step", 0), c.value("id", ""), how, verdict,
                        ms(c["median_ms"]), gain);
  }
  return text;
}

}  // namespace kforge::report

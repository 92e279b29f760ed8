#include "report/suite_report.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "common/error.h"
#include "report/run_directory.h"

namespace kforge::report {
namespace {

// The JSON value at `pointer` (e.g. "/final/speedup/speedup"), or an Error naming it.
const nlohmann::json& field(const nlohmann::json& result, const std::string& pointer) {
  nlohmann::json::json_pointer at(pointer);
  if (!result.contains(at)) throw Error("result.json: " + pointer + ": missing");
  return result.at(at);
}

double number_field(const nlohmann::json& result, const std::string& pointer) {
  const nlohmann::json& value = field(result, pointer);
  if (!value.is_number()) {
    throw Error("result.json: " + pointer + ": expected a number, got " + value.dump());
  }
  return value.get<double>();
}

std::optional<double> optional_number(const nlohmann::json& result, const std::string& pointer) {
  nlohmann::json::json_pointer at(pointer);
  if (!result.contains(at) || !result.at(at).is_number()) return std::nullopt;
  return result.at(at).get<double>();
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string or_dash(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "-";
}

// A cell of a Markdown table: one line, no column separators.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

std::string cost_line(const char* what, const CostSummary& cost, int tasks, const char* unit,
                      const char* format) {
  if (cost.reported == 0) return fmt::format("- {}: not reported\n", what);
  std::string mean = fmt::format(fmt::runtime(format), cost.mean);
  std::string total = fmt::format(fmt::runtime(format), cost.total);
  return fmt::format("- {}: {}{} per task, {}{} in all ({} of {} tasks reported it)\n", what, mean,
                     unit, total, unit, cost.reported, tasks);
}

// One aggregate row's cells after "| tasks |" (or after the baseline's name).
std::string aggregate_values(const SuiteMetrics& metrics) {
  std::string values = fmt::format(" {} | {} ({}) |", metrics.task_count,
                                   percent(metrics.correct_fraction), metrics.correct_count);
  for (const FastP& f : metrics.fast_p) values += " " + percent(f.fraction) + " |";
  if (const std::optional<GeomeanSpeedup>& g = metrics.geomean_speedup) {
    values += fmt::format(" {:.3f}x ({:.0f}% CI {:.3f}x-{:.3f}x, {} tasks) |\n", g->geomean,
                          100.0 * g->level, g->ci_low, g->ci_high, g->count);
  } else {
    values += " - (no correct task) |\n";
  }
  return values;
}

// The KernelBench columns; with a compile aggregate, a first column names the baseline of each
// row (the eager-only table keeps the shape it always had).
std::string aggregate_table(const SuiteMetrics& metrics,
                            const std::optional<CompileAggregate>& compile) {
  std::string header = compile ? "| baseline | tasks | correct |" : "| tasks | correct |";
  std::string rule = compile ? "| --- | ---: | ---: |" : "| ---: | ---: |";
  for (const FastP& f : metrics.fast_p) {
    header += " " + fast_p_name(f.p) + " |";
    rule += " ---: |";
  }
  header += " geomean speedup (correct tasks) |\n";
  rule += " --- |\n";
  if (!compile) return header + rule + "|" + aggregate_values(metrics);
  return header + rule + "| eager |" + aggregate_values(metrics) + "| torch.compile |" +
         aggregate_values(compile->metrics);
}

// The cell of a row's speedup over torch.compile and its interval.
std::pair<std::string, std::string> compile_cells(const SuiteRow& r) {
  if (r.compile_speedup) {
    return {fmt::format("{:.3f}x{}", *r.compile_speedup,
                        r.compile_status == "cached" ? " (cached)" : ""),
            fmt::format("{:.3f}-{:.3f}x", r.compile_ci_low, r.compile_ci_high)};
  }
  return {r.correct ? "none" : "-", "-"};
}

std::string task_table(const std::vector<SuiteRow>& rows, bool with_compile) {
  std::string text = "| task | run | correct | speedup | CI |";
  std::string rule = "| --- | --- | --- | ---: | --- |";
  if (with_compile) {
    text += " vs compile | CI |";
    rule += " ---: | --- |";
  }
  text += " reference ms | generator | family | best | candidates (correct) | wall s | device s | "
          "LLM $ | why no correct candidate |\n";
  rule += " ---: | --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n";
  text += rule;
  auto or_dash_text = [](const std::string& value) { return value.empty() ? "-" : cell(value); };
  for (const SuiteRow& r : rows) {
    std::string run =
        r.completed ? (r.resumed ? "earlier run" : "completed")
        : r.unserved ? (r.reference_check == "ran" ? "reference only" : "not run")
                     : "error";
    std::string speedup = r.correct ? fmt::format("{:.3f}x", r.speedup) : "-";
    std::string interval =
        r.correct ? fmt::format("{:.3f}-{:.3f}x", r.speedup_ci_low, r.speedup_ci_high) : "-";
    std::string candidates =
        r.completed ? fmt::format("{} ({})", r.candidates, r.correct_candidates) : "-";
    text += fmt::format("| {} | {} | {} | {} | {} |", cell(r.name), run,
                        r.correct ? "yes" : "no", speedup, interval);
    if (with_compile) {
      const auto [vs_compile, compile_interval] = compile_cells(r);
      text += " " + vs_compile + " | " + compile_interval + " |";
    }
    text += fmt::format(" {} | {} | {} | {} | {} | {:.1f} | {} | {} | {} |\n",
                        or_dash(r.reference_ms, "{:.4f}"), or_dash_text(r.generator), or_dash_text(r.family), or_dash_text(r.best),
                        candidates, r.wall_s, or_dash(r.device_s, "{:.1f}"),
                        or_dash(r.llm_cost_usd, "{:.4f}"),
                        r.correct ? "-" : or_dash_text(r.failure));
  }
  return text;
}

// The compile baseline's fields of a row from result.json ("baseline", "compile_baseline",
// "/final/speedup_vs_compile"); absent fields (a result.json from before them) leave eager.
void read_compile_into(const nlohmann::json& result, SuiteRow& row) {
  row.baseline = result.value("baseline", "eager");
  row.compile_speedup.reset();
  row.compile_status.clear();
  row.compile_note.clear();
  const auto compile = result.find("compile_baseline");
  if (compile == result.end() || !compile->is_object()) return;
  row.compile_status = compile->value("status", "");
  row.compile_note = compile->value("message", "");
  const auto cached = compile->find("cached");
  if (row.compile_status == "cached" && cached != compile->end() && cached->is_object()) {
    row.compile_note = "cached from " + cached->value("measured_at", "?") + " (run " +
                       cached->value("run_dir", "?") + ")";
  }
  if (std::optional<double> speedup = optional_number(result, "/final/speedup_vs_compile/speedup")) {
    row.compile_speedup = speedup;
    row.compile_ci_low = number_field(result, "/final/speedup_vs_compile/ci_low");
    row.compile_ci_high = number_field(result, "/final/speedup_vs_compile/ci_high");
  }
}

}  // namespace

void read_run_into(const nlohmann::json& run, SuiteRow& row) {
  if (!run.is_object()) return;
  if (row.generator.empty()) row.generator = run.value("generator", "");
  if (row.family.empty()) row.family = run.value("family", "");
}

std::string SuiteRow::status() const {
  if (unserved) return "not served";
  if (errored()) return "error";
  return correct ? "correct" : "not correct";
}

std::optional<SuiteTaskOutcome> SuiteRow::compile_outcome() const {
  SuiteTaskOutcome o = outcome();
  if (compile_status == "not_applicable") return std::nullopt;
  if (compile_speedup) {
    o.speedup = *compile_speedup;
    return o;
  }
  if (correct) return std::nullopt;  // correct, but nothing to compare with
  return o;
}

std::optional<CompileAggregate> compile_aggregate(const std::vector<SuiteRow>& rows) {
  bool any = false;
  for (const SuiteRow& row : rows) any = any || row.baseline == "compile";
  if (!any) return std::nullopt;
  CompileAggregate aggregate;
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) {
    if (std::optional<SuiteTaskOutcome> o = row.compile_outcome()) {
      outcomes.push_back(*o);
    } else {
      ++aggregate.left_out;
    }
  }
  aggregate.metrics = compute_suite_metrics(outcomes);
  return aggregate;
}

SuiteTaskOutcome SuiteRow::outcome() const {
  SuiteTaskOutcome o;
  o.name = name;
  o.correct = correct;
  o.speedup = speedup;
  o.wall_s = wall_s;
  o.device_s = device_s;
  o.llm_cost_usd = llm_cost_usd;
  return o;
}

nlohmann::json SuiteRow::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"task_path", task_path},
                      {"run_dir", run_dir},
                      {"log", log_path},
                      {"completed", completed},
                      {"status", status()},
                      {"resumed", resumed},
                      {"task", task},
                      {"backend", backend},
                      {"generator", generator},
                      {"family", family},
                      {"baseline", baseline},
                      {"correct", correct},
                      {"best", best},
                      {"candidates", candidates},
                      {"correct_candidates", correct_candidates},
                      {"wall_s", wall_s},
                      {"exit", exit},
                      {"failure", failure},
                      {"unserved", unserved},
                      {"reference_check", reference_check}};
  j["reference_ms"] = reference_ms ? nlohmann::json(*reference_ms) : nlohmann::json();
  j["speedup"] = correct ? nlohmann::json{{"speedup", speedup},
                                          {"ci_low", speedup_ci_low},
                                          {"ci_high", speedup_ci_high},
                                          {"level", speedup_ci_level}}
                         : nlohmann::json();
  j["speedup_vs_compile"] = compile_speedup ? nlohmann::json{{"speedup", *compile_speedup},
                                                              {"ci_low", compile_ci_low},
                                                              {"ci_high", compile_ci_high}}
                                            : nlohmann::json();
  j["compile_status"] = compile_status;
  j["compile_note"] = compile_note;
  j["device_s"] = device_s ? nlohmann::json(*device_s) : nlohmann::json();
  j["llm_cost_usd"] = llm_cost_usd ? nlohmann::json(*llm_cost_usd) : nlohmann::json();
  return j;
}

std::optional<double> device_seconds(const nlohmann::json& result) {
  if (std::optional<double> top = optional_number(result, "/device_s")) return top;
  return optional_number(result, "/budget/spent/device_s");
}

void read_result_into(const nlohmann::json& result, SuiteRow& row) {
  if (!result.is_object()) throw Error("result.json: expected a JSON object");
  const nlohmann::json& candidates = field(result, "/candidates");
  if (!candidates.is_array()) throw Error("result.json: /candidates: expected an array");
  row.candidates = static_cast<int>(candidates.size());
  row.correct_candidates = 0;
  for (const nlohmann::json& c : candidates) {
    row.correct_candidates += c.is_object() && c.value("verdict", "") == "ok";
  }
  row.task = result.value("task", "");
  row.backend = result.value("backend", "");
  row.generator = result.value("generator", "");
  row.family = result.value("family", "");
  read_compile_into(result, row);
  row.device_s = device_seconds(result);
  row.llm_cost_usd = optional_number(result, "/llm/cost_usd");
  const nlohmann::json& best = field(result, "/best");
  row.correct = !best.is_null();
  if (!row.correct) {
    row.best.clear();
    row.failure =
        fmt::format("no candidate passed the correctness gate ({} evaluated)", row.candidates);
    row.completed = true;
    return;
  }
  row.best = best.value("id", "");
  row.reference_ms = optional_number(result, "/final/reference/median_ms");
  row.speedup = number_field(result, "/final/speedup/speedup");
  if (!std::isfinite(row.speedup) || row.speedup <= 0.0) {
    throw Error(fmt::format("result.json: /final/speedup/speedup: expected a number > 0, got {}",
                            row.speedup));
  }
  row.speedup_ci_low = number_field(result, "/final/speedup/ci_low");
  row.speedup_ci_high = number_field(result, "/final/speedup/ci_high");
  row.speedup_ci_level = optional_number(result, "/final/speedup/level").value_or(0.95);
  row.failure.clear();
  row.completed = true;
}

nlohmann::json suite_json(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics,
                          const std::string& suite_dir,
                          const std::vector<std::string>& optimize_args) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const SuiteRow& row : rows) tasks.push_back(row.to_json());
  nlohmann::json vs_compile;
  if (const std::optional<CompileAggregate> compile = compile_aggregate(rows)) {
    vs_compile = compile->metrics.to_json();
    vs_compile["left_out"] = compile->left_out;
  }
  return {{"kforge_version", KFORGE_VERSION},
          {"suite_dir", suite_dir},
          {"optimize_args", optimize_args},
          {"updated", utc_now_iso8601()},
          {"tasks", tasks},
          {"aggregate", metrics.to_json()},
          {"aggregate_vs_compile", vs_compile}};
}

std::string render_suite_markdown(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics) {
  std::string text = fmt::format("# kforge suite: {} task{}\n\n", metrics.task_count,
                                 metrics.task_count == 1 ? "" : "s");
  const std::optional<CompileAggregate> compile = compile_aggregate(rows);
  text += aggregate_table(metrics, compile) + "\n";
  text +=
      "fast_p: share of all tasks that are correct with speedup > p (KernelBench); the "
      "geomean is over correct tasks, its interval a bootstrap over tasks.\n";
  if (compile) {
    text += fmt::format(
        "torch.compile: the best against torch.compile of the reference, timed with it at the "
        "final rung (or through a cached compile/eager ratio, marked); {} task{} without a "
        "torch.compile baseline left out (listed below).\n",
        compile->left_out, compile->left_out == 1 ? "" : "s");
  }
  text += "\n";
  text += "Cost:\n";
  text += cost_line("wall time", metrics.wall_s, metrics.task_count, " s", "{:.1f}");
  text += cost_line("device time", metrics.device_s, metrics.task_count, " device-s", "{:.1f}");
  text += cost_line("LLM cost", metrics.llm_cost_usd, metrics.task_count, " USD", "{:.4f}");
  text += "\n" + task_table(rows, compile.has_value());
  std::string errors, not_correct, unserved;
  for (const SuiteRow& r : rows) {
    if (r.correct) continue;
    if (r.unserved) {  // the table's row says why; here only which
      unserved += (unserved.empty() ? "" : ", ") + r.name;
      continue;
    }
    std::string how = r.exit.empty() || r.exit == "exit code 0" ? "" : " (" + r.exit + ")";
    std::string line = fmt::format("- {}{}: {}\n", r.name, how, cell(r.failure));
    if (!r.errored()) {
      not_correct += line;
      continue;
    }
    errors += line;
    if (!r.log_path.empty()) errors += fmt::format("  log: {}\n", r.log_path);
  }
  if (!errors.empty()) text += "\nErrors (the run did not finish; counted as not correct):\n" + errors;
  if (!not_correct.empty()) text += "\nNot correct:\n" + not_correct;
  if (!unserved.empty()) {
    text += "\nNot served (not run: no built-in kernel family computes these, and the templates "
            "generator writes only those; `--generator llm` writes kernels for them; counted as "
            "not correct): " + unserved + "\n";
  }
  std::string no_compile;
  for (const SuiteRow& r : rows) {
    if (!compile || r.compile_speedup || !r.correct) continue;
    no_compile += fmt::format("- {}: {}\n", r.name,
                              cell(r.compile_note.empty() ? "not timed" : r.compile_note));
  }
  if (!no_compile.empty()) text += "\nNo torch.compile baseline (left out of the torch.compile row):\n" + no_compile;
  return text;
}

}  // namespace kforge::report

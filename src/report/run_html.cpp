#include "report/run_html.h"

#include <cmath>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "report/lineage_text.h"
#include "report/memory_graph.h"
#include "report/roofline.h"
#include "report/search_path.h"
#include "report/svg_chart.h"

namespace kforge::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}pre{background:#f6f6f6;padding:10px;
overflow:auto;font-size:12px}.status{padding:6px 10px;border-radius:4px;display:inline-block}
.status.finished{background:#e3f4e1}.status.unfinished{background:#fdf0d5}.status.failed{background:#f9dcdc}
.plot-area{fill:#fff;stroke:#999}.grid{stroke:#eee}.tick{font-size:10px;fill:#555}
.axis-label{font-size:11px;fill:#333}.line{fill:none;stroke:#1f77b4;stroke-width:2}
.line.roof{stroke:#999;stroke-dasharray:4 3}.line-label{font-size:10px;fill:#555}.rule{stroke:#c33;stroke-dasharray:3 3}
.mark{stroke:#333;stroke-width:.5}.mark.ok{fill:#2ca02c}.mark.wrong_answer{fill:#d62728}
.mark.compile_error{fill:#9467bd}.mark.runtime_error{fill:#ff7f0e}.mark.timeout{fill:#8c564b}
.mark.rejected_by_policy{fill:#e377c2}.mark.implausible_timing{fill:#bcbd22}.mark.bar{fill:#1f77b4}
.mark.reference{fill:#888}.mark.best{fill:#2ca02c}.mark.profiled{fill:#ff7f0e}.mark.final{fill:#17becf}.whisker{stroke:#222;fill:none}
.legend span{margin-right:12px;font-size:12px}.memory-graph svg,.path-graph svg{max-width:100%;height:auto}.plot-note{font-size:10px;fill:#a33}.note{color:#666;font-size:13px})";

std::optional<json> read_json_file(const fs::path& path) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    return json::parse(read_file(path));
  } catch (const std::exception&) {
    return std::nullopt;  // half-written or damaged: the page says what it has
  }
}

std::vector<json> read_events(const fs::path& path) {
  std::vector<json> events;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    try {
      events.push_back(json::parse(line));
    } catch (const std::exception&) {
      // A line cut by a kill mid-write.
    }
  }
  return events;
}

double number_or(const json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text_or(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One evaluated candidate as the events tell it.
struct CandidateMark {
  int index = 0;
  std::string id;
  std::string verdict;
  std::string outcome;
  int step = 0;
  std::optional<double> median_ms;
  /// The reference timed in its rung-1 window (0: none recorded; the run's reference_timed).
  double reference_ms = 0.0;
  double device_s = 0.0;
};

std::string section(const std::string& title, const std::string& body) {
  return "<h2>" + svg::escape(title) + "</h2>\n" + body;
}

// Best-so-far quick speedup against candidates and against device seconds; `best_at_index`:
// candidate index -> the quick speedup of the new best accepted there.
std::string progress_charts(const std::vector<CandidateMark>& marks,
                            const std::map<std::string, double>& best_at_index,
                            double reference_ms) {
  if (marks.empty() || reference_ms <= 0) {
    return "<p class=\"note\">No candidate evaluated yet.</p>\n";
  }
  std::vector<svg::Point> by_index, by_device;
  svg::Line best_index{{}, "best", true, "best so far"}, best_device{{}, "best", true, "best so far"};
  double best = 0.0;
  for (const CandidateMark& m : marks) {
    const double over = m.reference_ms > 0 ? m.reference_ms : reference_ms;
    const double speedup = m.median_ms && *m.median_ms > 0 ? over / *m.median_ms : 0.0;
    const std::string title = fmt::format(
        "#{} {} (step {}): {}{}, {}", m.index, m.id, m.step, m.verdict,
        m.median_ms ? fmt::format(", {:.4f} ms, {:.3f}x", *m.median_ms, speedup) : "", m.outcome);
    by_index.push_back({static_cast<double>(m.index + 1), speedup, m.verdict, title});
    by_device.push_back({m.device_s, speedup, m.verdict, title});
    if (auto it = best_at_index.find(std::to_string(m.index)); it != best_at_index.end()) {
      best = it->second;
    }
    if (best > 0) {
      best_index.points.emplace_back(m.index + 1, best);
      best_device.points.emplace_back(m.device_s, best);
    }
  }
  std::string legend = "<p class=\"legend\">";
  for (const char* verdict : {"ok", "wrong_answer", "compile_error", "runtime_error", "timeout",
                              "rejected_by_policy", "implausible_timing"}) {
    legend += fmt::format("<span><svg width=\"10\" height=\"10\"><circle class=\"{}\" cx=\"5\" "
                          "cy=\"5\" r=\"4\"/></svg> {}</span>",
                          std::string("mark ") + verdict, verdict);
  }
  legend += "</p>\n<p class=\"note\">Quick speedup (rung 1: the reference's quick median over "
            "the candidate's); a candidate without a timing is drawn at 0.</p>\n";
  return legend +
         svg::scatter_plot("by-candidate", {"candidates evaluated", "quick speedup (x)", false, false, 0.0}, by_index,
                           {best_index}) +
         svg::scatter_plot("by-device-seconds", {"device seconds spent", "quick speedup (x)", false, false, 0.0},
                           by_device, {best_device});
}

std::string funnel_chart(const std::vector<CandidateMark>& marks, const std::optional<json>& result,
                         int full_rungs, bool final_done) {
  std::array<int, 4> reached{};
  if (result && result->contains("candidates")) {
    for (const json& c : result->at("candidates")) {
      // A duplicate reached no rung itself: its original is counted.
      if (c.contains("duplicate_of") && c.at("duplicate_of").is_string()) continue;
      const int rung = static_cast<int>(number_or(c, "rung", 0));
      for (int r = 0; r <= std::min(rung, 3); ++r) ++reached[r];
    }
  } else {
    reached[0] = static_cast<int>(marks.size());
    for (const CandidateMark& m : marks) reached[1] += m.median_ms ? 1 : 0;
    reached[2] = full_rungs;
    reached[3] = final_done ? 1 : 0;
  }
  std::vector<svg::Bar> bars;
  const char* names[] = {"rung 0 (gate)", "rung 1 (quick)", "rung 2 (full)", "rung 3 (final)"};
  for (int r = 0; r < 4; ++r) {
    bars.push_back({names[r], static_cast<double>(reached[r]), std::nullopt, std::nullopt, "",
                    fmt::format("{}: {} candidate(s)", names[r], reached[r])});
  }
  return svg::bar_chart("funnel", "candidates", bars);
}

// Every raw sample of the final rung's interleaved rounds (result.json final.reference_rounds_ms
// and final.best_rounds_ms): round r's samples spread over [r, r + 1) in the order they were
// timed, so the spread within a round and any drift across rounds show. A run made before the
// samples were kept gets a note instead.
std::string final_samples_chart(const json& final) {
  const json& reference = final.value("reference_rounds_ms", json());
  const json& best = final.value("best_rounds_ms", json());
  if (!reference.is_array() || !best.is_array()) {
    return "<p class=\"note\">The raw samples of the final rounds are not in this run's "
           "result.json (a kforge before they were kept made it): the summary above is what it "
           "recorded.</p>\n";
  }
  std::vector<svg::Point> points;
  for (const auto& [rounds, label] :
       {std::pair{&reference, "reference"}, std::pair{&best, "best"}}) {
    for (size_t r = 0; r < rounds->size(); ++r) {
      const json& samples = (*rounds)[r];
      if (!samples.is_array()) continue;
      for (size_t i = 0; i < samples.size(); ++i) {
        if (!samples[i].is_number()) continue;
        const double ms = samples[i].get<double>();
        const double x = static_cast<double>(r + 1) +
                         (static_cast<double>(i) + 0.5) / static_cast<double>(samples.size());
        points.push_back(
            {x, ms, label,
             fmt::format("{}, round {}, sample {}: {:.4f} ms", label, r + 1, i + 1, ms)});
      }
    }
  }
  svg::Axes axes;
  axes.x_label = "final round (its samples in timing order)";
  axes.y_label = "ms";
  return section("Final rung: every sample of the interleaved rounds (reference grey, best green)",
                 svg::scatter_plot("final-samples", axes, points));
}

std::string best_charts(const json& result) {
  std::string out;
  const json& best = result.at("best");
  const json& final = result.value("final", json());
  std::vector<svg::Bar> bars;
  if (best.contains("full_workload_speedups") && best.at("full_workload_speedups").is_array()) {
    for (const json& w : best.at("full_workload_speedups")) {
      const double s = number_or(w, "speedup", 0.0);
      bars.push_back({"rung 2: " + text_or(w, "workload"), s, std::nullopt, std::nullopt, "",
                      fmt::format("rung 2 on '{}': {:.3f}x", text_or(w, "workload"), s)});
    }
  }
  if (final.is_object() && final.contains("speedup")) {
    const json& s = final.at("speedup");
    const double v = number_or(s, "speedup", 0.0);
    bars.push_back({"final (paired)", v, number_or(s, "ci_low", v), number_or(s, "ci_high", v),
                    "final",
                    fmt::format("final rung: {:.3f}x, {:.0f}% CI {:.3f}-{:.3f}x", v,
                                100 * number_or(s, "level", 0.95), number_or(s, "ci_low", v),
                                number_or(s, "ci_high", v))});
  }
  out += section("The best's speedup per timed workload",
                 svg::bar_chart("per-workload", "speedup (x)", bars, 1.0, "1x"));
  if (!final.is_object()) return out;
  const json& ref = final.value("reference", json::object());
  const json& mine = final.value("best", json::object());
  std::vector<svg::Bar> timings;
  for (const auto& [label, summary, css] :
       {std::tuple{"reference", ref, "reference"}, std::tuple{"best", mine, "best"}}) {
    const double median = number_or(summary, "median_ms", 0.0);
    timings.push_back({label, median, number_or(summary, "min_ms", median),
                       number_or(summary, "max_ms", median), css,
                       fmt::format("{}: median {:.4f} ms, min {:.4f}, max {:.4f} ({} samples)",
                                   label, median, number_or(summary, "min_ms", median),
                                   number_or(summary, "max_ms", median),
                                   static_cast<int>(number_or(summary, "count", 0)))});
  }
  out += section("Final rung: reference and best (median, whiskers min-max)",
                 svg::bar_chart("timings", "ms", timings));
  out += final_samples_chart(final);
  out += roofline_section(result);
  return out;
}

std::string path_table(const json& result) {
  std::string rows;
  for (const json& c : result.value("candidates", json::array())) {
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        static_cast<int>(number_or(c, "step", 0)), svg::escape(text_or(c, "id")),
                        svg::escape(text_or(c, "direction")), svg::escape(text_or(c, "strategy")),
                        svg::escape(text_or(c, "verdict") +
                                    (c.contains("duplicate_of") && c.at("duplicate_of").is_string()
                                         ? fmt::format(" (same as #{})",
                                                       static_cast<int>(number_or(c, "duplicate_of_index", -1)))
                                         : std::string())),
                        svg::escape(text_or(c, "change")));
  }
  return "<table><tr><th>step</th><th>candidate</th><th>direction</th><th>strategy</th>"
         "<th>verdict</th><th>change</th></tr>\n" + rows + "</table>\n";
}

}  // namespace

std::string render_run_html(const fs::path& run_dir) {
  const std::optional<json> run = read_json_file(run_dir / "run.json");
  if (!run) throw Error(run_dir.string() + ": not a kforge run directory (no readable run.json)");
  const std::optional<json> result = read_json_file(run_dir / "result.json");
  const std::vector<json> events = read_events(run_dir / "events.jsonl");
  std::vector<CandidateMark> marks;
  std::map<std::string, double> best_at_index;  // candidate index -> the new best's speedup
  std::map<std::string, int> index_of;
  double reference_ms = 0.0;
  int full_rungs = 0;
  bool final_done = false;
  std::string device, toolchain;
  for (const json& e : events) {
    const std::string kind = text_or(e, "event");
    if (kind == "run_started") {
      device = text_or(e, "device");
      toolchain = text_or(e, "toolchain");
    } else if (kind == "reference_timed") {
      reference_ms = number_or(e, "median_ms", 0.0);
    } else if (kind == "candidate" || kind == "candidate_replayed") {
      CandidateMark m;
      m.index = static_cast<int>(number_or(e, "index", static_cast<double>(marks.size())));
      m.id = text_or(e, "id");
      m.verdict = text_or(e, "verdict");
      m.outcome = text_or(e, "outcome");
      m.step = static_cast<int>(number_or(e, "step", 0));
      if (e.contains("median_ms") && e.at("median_ms").is_number()) m.median_ms = e.at("median_ms").get<double>();
      m.reference_ms = number_or(e, "quick_reference_ms", 0.0);
      m.device_s = number_or(e, "spent_device_s", 0.0);
      if (m.outcome == "accepted" && m.median_ms && *m.median_ms > 0) {
        best_at_index[std::to_string(m.index)] =
            (m.reference_ms > 0 ? m.reference_ms : reference_ms) / *m.median_ms;
      }
      marks.push_back(m);
    } else if (kind == "full_rung") {
      ++full_rungs;
    } else if (kind == "final") {
      final_done = true;
    }
  }
  const std::string task = run->value("task", "?");
  std::string status, status_class;
  if (result) {
    status = "finished: " + (result->value("best", json()).is_null()
                                 ? std::string("no candidate was correct")
                                 : fmt::format("best {:.3f}x over the reference",
                                               number_or(result->at("final").is_object()
                                                             ? result->at("final").value("speedup", json::object())
                                                             : json::object(),
                                                         "speedup", 0.0)));
    status_class = "finished";
  } else if (fs::exists(run_dir / "failed.txt")) {
    status = "failed: " + read_file(run_dir / "failed.txt");
    status_class = "failed";
  } else {
    status = "not finished: the run was stopped half-way or is still running (no result.json); "
             "this page shows what it did so far";
    status_class = "unfinished";
  }
  std::string command = fmt::format(
      "kforge optimize {} --backend {} --steps {} --seed {} --policy {} --generator {}{}",
      run->value("task_path", "TASK"), run->value("backend", "auto"),
      run->value("steps", 0), run->value("seed", 0), run->value("policy", "htam"),
      run->value("generator", "templates"),
      run->value("baseline", "eager") == "compile" ? " --baseline compile" : "");
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kforge run: " +
                     svg::escape(task) + "</title>\n<style>" + kStyle + "</style></head><body>\n";
  page += "<h1>kforge run: " + svg::escape(task) + "</h1>\n";
  page += "<p><span class=\"status " + status_class + "\">" + svg::escape(status) + "</span></p>\n";
  page += fmt::format("<p>{} on {} ({}), {}; started {}; {} candidate(s) evaluated; reference "
                      "{:.4f} ms (quick timing)</p>\n",
                      svg::escape(run->value("generator", "")), svg::escape(run->value("backend", "")),
                      svg::escape(device), svg::escape(toolchain), svg::escape(run->value("started", "")),
                      marks.size(), reference_ms);
  page += "<p>Reproduce: <code>" + svg::escape(command) + "</code></p>\n";
  page += section("Best so far", progress_charts(marks, best_at_index, reference_ms));
  page += section("Rung funnel", funnel_chart(marks, result, full_rungs, final_done));
  const std::string memory_graph = memory_graph_section(run_dir, events);
  if (!result || result->value("best", json()).is_null()) page += memory_graph;
  if (result && !result->value("best", json()).is_null()) {
    page += best_charts(*result);
    const json& profile = result->value("profile", json());
    if (profile.is_object()) {
      std::string lines;
      for (const json& line : profile.value("diagnosis", json::array())) {
        lines += "<li>" + svg::escape(line.get<std::string>()) + "</li>";
      }
      page += section("Profile of the best (Nsight Compute)",
                      lines.empty() ? "<p class=\"note\">" + svg::escape(text_or(profile, "message")) + "</p>\n"
                                    : "<ul>" + lines + "</ul>\n");
    }
    std::string lineage;
    for (const std::string& line : lineage_lines(result->at("best").value("lineage", json()))) {
      lineage += "<li>" + svg::escape(line) + "</li>";
    }
    if (!lineage.empty()) {
      page += section("Lineage of the best (the moves that led to it, and the memory behind each)",
                      "<ul id=\"lineage\">" + lineage + "</ul>\n");
    }
    page += memory_graph;
    std::string why;
    const std::string graph = render_dot_svg(search_path_dot(result->value("candidates", json::array())), why);
    page += section("The search's path through the memory (direction and strategy of each candidate)",
                    (graph.empty() ? "<p class=\"note\">" + svg::escape(why) + "</p>\n"
                                   : "<div class=\"path-graph\">" + graph + "</div>\n") +
                        path_table(*result));
    // The recorded best's file (best.cpp, best.cu, or best.py for a ModelNew), found in this
    // run directory by name, so that a moved run still shows it.
    const fs::path best_file =
        run_dir / fs::path(text_or(result->at("best"), "source")).filename();
    page += section("The best kernel: " + text_or(result->at("best"), "id"),
                    "<pre>" + svg::escape(fs::is_regular_file(best_file) ? read_file(best_file) : "") +
                        "</pre>\n");
  }
  page += "</body></html>\n";
  return page;
}

std::string write_run_html(const fs::path& run_dir) {
  try {
    write_file_atomically(run_dir / "report.html", render_run_html(run_dir));
    return "";
  } catch (const std::exception& e) {
    return std::string("report.html: ") + e.what();
  }
}

}  // namespace kforge::report

#include "report/suite_html.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "report/svg_chart.h"

namespace kforge::report {

namespace {

constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
.plot-area{fill:#fff;stroke:#999}.grid{stroke:#eee}.tick{font-size:10px;fill:#555}
.axis-label{font-size:11px;fill:#333}.line{fill:none;stroke:#1f77b4;stroke-width:2}
.line-label{font-size:10px;fill:#555}.rule{stroke:#c33;stroke-dasharray:3 3}.mark{stroke:#333;stroke-width:.5}
.mark.fast{fill:#1f77b4}.mark.bar{fill:#2ca02c}.whisker{stroke:#222;fill:none}
tr.correct td:nth-child(3){background:#e3f4e1}tr.error td:nth-child(3){background:#f9dcdc}
tr.unserved td:nth-child(3){background:#eee}.note{color:#666;font-size:13px})";

std::string cell(const std::string& text) { return "<td>" + svg::escape(text) + "</td>"; }

}  // namespace

std::string render_suite_html(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics,
                              const std::string& suite_dir) {
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kforge suite</title>\n<style>";
  page += kStyle;
  page += "</style></head><body>\n<h1>kforge suite: " + std::to_string(rows.size()) + " tasks</h1>\n";
  page += "<p class=\"note\">" + svg::escape(suite_dir) + "</p>\n";
  // The aggregate, KernelBench's columns.
  page += "<table><tr><th>tasks</th><th>correct</th>";
  for (const FastP& f : metrics.fast_p) page += fmt::format("<th>fast_{:g}</th>", f.p);
  page += "<th>geomean speedup (correct tasks)</th></tr>\n<tr>";
  page += fmt::format("<td>{}</td><td>{:.1f}% ({})</td>", metrics.task_count,
                      100 * metrics.correct_fraction, metrics.correct_count);
  for (const FastP& f : metrics.fast_p) page += fmt::format("<td>{:.1f}%</td>", 100 * f.fraction);
  page += metrics.geomean_speedup
              ? fmt::format("<td>{:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x, {} tasks)</td>",
                            metrics.geomean_speedup->geomean, 100 * metrics.geomean_speedup->level,
                            metrics.geomean_speedup->ci_low, metrics.geomean_speedup->ci_high,
                            metrics.geomean_speedup->count)
              : std::string("<td>- (no correct task)</td>");
  page += "</tr></table>\n";

  // fast_p over p: it changes only at the correct tasks' speedups; p from 0 to past the largest.
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) outcomes.push_back(row.outcome());
  std::set<double> thresholds(std::begin(kFastPThresholds), std::end(kFastPThresholds));
  for (const SuiteTaskOutcome& o : outcomes) {
    if (o.correct) thresholds.insert(o.speedup);
  }
  std::vector<svg::Point> points;
  svg::Line curve{{}, "fast-p", true, "fast_p"};
  for (double p : thresholds) {
    const FastP f = fast_p(outcomes, p);
    points.push_back({p, f.fraction, "fast",
                      fmt::format("fast_{:.3g} = {:.1f}% ({} of {} tasks correct with speedup > "
                                  "{:.3g})",
                                  p, 100 * f.fraction, f.count, outcomes.size(), p)});
    curve.points.emplace_back(p, f.fraction);
  }
  page += "<h2>fast_p: the share of all tasks correct with speedup &gt; p</h2>\n";
  page += svg::scatter_plot("fast-p", {"p (speedup threshold)", "fast_p", false, false, 0.0},
                            points, {curve});

  std::vector<svg::Bar> bars;
  for (const SuiteRow& row : rows) {
    if (!row.correct) continue;
    bars.push_back({row.name, row.speedup, row.speedup_ci_low, row.speedup_ci_high, "",
                    fmt::format("{}: {:.3f}x ({:.0f}% CI {:.3f}-{:.3f}x)", row.name, row.speedup,
                                100 * row.speedup_ci_level, row.speedup_ci_low,
                                row.speedup_ci_high)});
  }
  page += "<h2>Speedup per correct task, with its confidence interval</h2>\n";
  page += bars.empty() ? std::string("<p class=\"note\">No correct task yet.</p>\n")
                       : svg::bar_chart("speedups", "speedup (x)", bars, 1.0, "1x");

  page += "<h2>Tasks</h2>\n<table><tr><th>task</th><th>run</th><th>status</th><th>speedup</th>"
          "<th>CI</th><th>reference ms</th><th>generator</th><th>family</th><th>wall s</th>"
          "<th>why no correct candidate</th></tr>\n";
  for (const SuiteRow& row : rows) {
    const std::string status = row.status();
    const std::string css = row.correct ? "correct" : row.unserved ? "unserved"
                            : row.errored()                      ? "error"
                                                                 : "incorrect";
    page += "<tr class=\"" + css + "\">" + cell(row.name) +
            "<td>" + (row.completed ? "<a href=\"" + svg::escape(row.name) + "/report.html\">" +
                                          "report.html</a>"
                                    : svg::escape(row.exit)) +
            "</td>" + cell(status) +
            cell(row.correct ? fmt::format("{:.3f}x", row.speedup) : "-") +
            cell(row.correct ? fmt::format("{:.3f}-{:.3f}x", row.speedup_ci_low, row.speedup_ci_high)
                             : "-") +
            cell(row.reference_ms ? fmt::format("{:.4f}", *row.reference_ms) : "-") +
            cell(row.generator.empty() ? "-" : row.generator) +
            cell(row.family.empty() ? "-" : row.family) + cell(fmt::format("{:.1f}", row.wall_s)) +
            cell(row.correct ? "-" : row.failure) + "</tr>\n";
  }
  page += "</table>\n</body></html>\n";
  return page;
}

}  // namespace kforge::report

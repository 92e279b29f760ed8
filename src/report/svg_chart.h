// Small SVG charts for kforge's HTML reports (report/run_html.h): scatter plots with step lines,
// bar charts with confidence intervals, and log axes for a roofline. Written here rather than
// taken from a charting library: the report must be one self-contained file that opens with no
// network, its numbers must be checkable by a test that counts marks, and these four kinds of
// plot need no script at all (a JavaScript library would be ~200 kB inlined per report and its
// output could only be tested after it ran). Every data mark carries class "mark" and a <title>
// (the browser's tooltip) with its exact numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kforge::report::svg {

/// `text` with &, <, >, " and ' escaped for HTML/SVG text and attribute values.
std::string escape(const std::string& text);

/// One data mark of a scatter plot.
struct Point {
  double x = 0.0;
  double y = 0.0;
  std::string css_class;  // e.g. the verdict: "ok", "wrong_answer" (colours in the page's CSS)
  std::string title;      // tooltip
};

/// A polyline drawn under the marks (a best-so-far step line, a roofline), not a mark.
struct Line {
  std::vector<std::pair<double, double>> points;
  std::string css_class;
  bool steps = false;  // horizontal then vertical segments (a best-so-far curve)
  std::string label;   // drawn at its last point
};

struct Axes {
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // values <= 0 are left out of a log axis
  bool log_y = false;
  std::optional<double> y_min;  // default: from the data (0 on a linear axis)
};

/// A scatter plot of `points` over `lines`, 640 x 320 px, with ticks and labels. Each of `notes`
/// is a line of text drawn at the plot area's top left (class "plot-note"), for what a reader
/// must know to read the plot, e.g. a quantity the data lacks.
std::string scatter_plot(const std::string& id, const Axes& axes, const std::vector<Point>& points,
                         const std::vector<Line>& lines = {},
                         const std::vector<std::string>& notes = {});

/// One bar, with an optional interval (whiskers).
struct Bar {
  std::string label;
  double value = 0.0;
  std::optional<double> low;
  std::optional<double> high;
  std::string css_class;
  std::string title;
};

/// A vertical bar chart; `rule` draws a horizontal reference line (e.g. 1x) with its label.
std::string bar_chart(const std::string& id, const std::string& y_label,
                      const std::vector<Bar>& bars, std::optional<double> rule = std::nullopt,
                      const std::string& rule_label = "");

}  // namespace kforge::report::svg

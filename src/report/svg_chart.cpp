#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kforge::report::svg {

namespace {

constexpr double kWidth = 640, kHeight = 320;
constexpr double kLeft = 64, kRight = 16, kTop = 16, kBottom = 48;

// Maps data values to pixels on one axis, linear or log10.
struct Scale {
  double low = 0.0, high = 1.0;  // data range (log10 of it on a log axis)
  double from = 0.0, to = 1.0;   // pixel range
  bool log = false;
  double operator()(double v) const {
    const double d = log ? std::log10(v) : v;
    return from + (d - low) / (high - low) * (to - from);
  }
};

Scale make_scale(std::vector<double> values, bool log, std::optional<double> forced_min,
                 double from, double to) {
  Scale s{0.0, 1.0, from, to, log};
  std::erase_if(values, [&](double v) { return !std::isfinite(v) || (log && v <= 0.0); });
  if (forced_min && (!log || *forced_min > 0)) values.push_back(*forced_min);
  if (!log && !forced_min) values.push_back(0.0);
  if (values.empty()) return s;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.low = log ? std::floor(std::log10(*lo)) : *lo;
  s.high = log ? std::ceil(std::log10(*hi)) : *hi;
  if (s.high <= s.low) s.high = s.low + 1.0;
  if (!log) s.high += 0.05 * (s.high - s.low);  // headroom
  return s;
}

std::string number(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e4 || a < 1e-2) return fmt::format("{:.0e}", v);
  return fmt::format("{:.3g}", v);
}

// Tick values of a scale: decades on a log axis, about five round steps on a linear one.
std::vector<double> ticks(const Scale& s) {
  std::vector<double> out;
  if (s.log) {
    for (double e = s.low; e <= s.high + 1e-9; e += 1.0) out.push_back(std::pow(10.0, e));
    return out;
  }
  const double span = s.high - s.low;
  const double raw = span / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  for (double v = std::ceil(s.low / step) * step; v <= s.high + 1e-9 * span; v += step) {
    out.push_back(std::fabs(v) < 1e-12 * span ? 0.0 : v);
  }
  return out;
}

// The chart's outline, grid, ticks and axis labels; no x ticks without `x` (a bar chart).
std::string frame(const std::string& id, const Axes& axes, const Scale* x, const Scale& y) {
  std::string out = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" role=\"img\">\n",
      escape(id), kWidth, kHeight, kWidth, kHeight);
  out += fmt::format("<rect class=\"plot-area\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                     kLeft, kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  for (double t : x ? ticks(*x) : std::vector<double>{}) {
    const double px = (*x)(t);
    out += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>"
                       "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       px, kTop, kHeight - kBottom, kHeight - kBottom + 14, number(t));
  }
  for (double t : ticks(y)) {
    const double py = y(t);
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>"
                       "<text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       kLeft, py, kWidth - kRight, kLeft - 4, py + 4, number(t));
  }
  if (!axes.x_label.empty()) {
    out += fmt::format("<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       (kLeft + kWidth - kRight) / 2, kHeight - 8, escape(axes.x_label));
  }
  if (!axes.y_label.empty()) {
    out += fmt::format("<text class=\"axis-label\" x=\"14\" y=\"{0}\" text-anchor=\"middle\" "
                       "transform=\"rotate(-90 14 {0})\">{1}</text>\n",
                       (kTop + kHeight - kBottom) / 2, escape(axes.y_label));
  }
  return out;
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string scatter_plot(const std::string& id, const Axes& axes, const std::vector<Point>& points,
                         const std::vector<Line>& lines, const std::vector<std::string>& notes) {
  std::vector<double> xs, ys;
  for (const Point& p : points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
  }
  for (const Line& line : lines) {
    for (const auto& [x, y] : line.points) {
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  const Scale x = make_scale(xs, axes.log_x, std::nullopt, kLeft, kWidth - kRight);
  const Scale y = make_scale(ys, axes.log_y, axes.y_min, kHeight - kBottom, kTop);
  const auto shown = [&](double vx, double vy) {
    return std::isfinite(vx) && std::isfinite(vy) && (!axes.log_x || vx > 0) &&
           (!axes.log_y || vy > 0);
  };
  std::string out = frame(id, axes, &x, y);
  for (const Line& line : lines) {
    std::string path;
    double last_y = 0.0;
    bool first = true;
    for (const auto& [vx, vy] : line.points) {
      if (!shown(vx, vy)) continue;
      if (!first && line.steps) path += fmt::format(" {:.1f},{:.1f}", x(vx), y(last_y));
      path += fmt::format(" {:.1f},{:.1f}", x(vx), y(vy));
      last_y = vy;
      first = false;
    }
    if (path.empty()) continue;
    out += fmt::format("<polyline class=\"line {}\" points=\"{}\"/>\n", escape(line.css_class), path);
    if (!line.label.empty()) {
      const auto& [vx, vy] = line.points.back();
      if (shown(vx, vy)) {
        out += fmt::format("<text class=\"line-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                           x(vx) - 4, y(vy) - 6, escape(line.label));
      }
    }
  }
  for (const Point& p : points) {
    if (!shown(p.x, p.y)) continue;
    out += fmt::format("<circle class=\"mark {}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\"><title>{}</title></circle>\n",
                       escape(p.css_class), x(p.x), y(p.y), escape(p.title));
  }
  for (size_t i = 0; i < notes.size(); ++i) {
    out += fmt::format("<text class=\"plot-note\" x=\"{}\" y=\"{}\">{}</text>\n", kLeft + 6,
                       kTop + 14 + 13 * static_cast<double>(i), escape(notes[i]));
  }
  return out + "</svg>\n";
}

std::string bar_chart(const std::string& id, const std::string& y_label,
                      const std::vector<Bar>& bars, std::optional<double> rule,
                      const std::string& rule_label) {
  std::vector<double> ys;
  for (const Bar& b : bars) {
    ys.push_back(b.value);
    if (b.high) ys.push_back(*b.high);
  }
  if (rule) ys.push_back(*rule);
  Axes axes;
  axes.y_label = y_label;
  const Scale x{0.0, static_cast<double>(std::max<size_t>(bars.size(), 1)), kLeft, kWidth - kRight, false};
  const Scale y = make_scale(ys, false, 0.0, kHeight - kBottom, kTop);
  std::string out = frame(id, axes, nullptr, y);
  const double slot = (x.to - x.from) / x.high;
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double left = x.from + slot * (static_cast<double>(i) + 0.2);
    const double top = y(std::max(b.value, 0.0));
    out += fmt::format("<rect class=\"mark bar {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                       "height=\"{:.1f}\"><title>{}</title></rect>\n",
                       escape(b.css_class), left, top, slot * 0.6, y(0.0) - top,
                       escape(b.title.empty() ? b.label + ": " + number(b.value) : b.title));
    if (b.low && b.high) {
      const double cx = left + slot * 0.3;
      out += fmt::format("<path class=\"whisker\" d=\"M{0:.1f},{1:.1f} V{2:.1f} M{3:.1f},{1:.1f} "
                         "H{4:.1f} M{3:.1f},{2:.1f} H{4:.1f}\"/>\n",
                         cx, y(*b.low), y(*b.high), cx - 6, cx + 6);
    }
    out += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       left + slot * 0.3, kHeight - kBottom + 14,
                       escape(b.label.size() > 24 ? b.label.substr(0, 23) + "…" : b.label));
  }
  if (rule) {
    out += fmt::format("<line class=\"rule\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>"
                       "<text class=\"line-label\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       kLeft, y(*rule), kWidth - kRight, kWidth - kRight - 2, y(*rule) - 4,
                       escape(rule_label));
  }
  return out + "</svg>\n";
}

}  // namespace kforge::report::svg

#include "report/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "report/svg_chart.h"

namespace kforge::report {
using nlohmann::json;

namespace {

double number_at(const json& j, const char* key) {
  if (!j.is_object()) return 0.0;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The best as Nsight Compute measured it: DRAM bytes read and written and kernel time, summed
// over its launches; nothing when the profile failed or lacks either.
struct Profiled {
  double dram_bytes = 0.0;
  double seconds = 0.0;
};

std::optional<Profiled> profiled(const json& profile) {
  if (!profile.is_object() || !profile.value("ok", false)) return std::nullopt;
  Profiled p;
  for (const json& kernel : profile.value("kernels", json::array())) {
    const json& metrics = kernel.value("metrics", json::object());
    p.dram_bytes +=
        number_at(metrics, "dram__bytes_read.sum") + number_at(metrics, "dram__bytes_write.sum");
    p.seconds += number_at(metrics, "gpu__time_duration.sum") * 1e-9;
  }
  if (p.dram_bytes <= 0 || p.seconds <= 0) return std::nullopt;
  return p;
}

// 49 points spread geometrically over [low, high], each with its `y(x)`; those where y is not
// finite (no roof reported there) are left out.
template <typename F>
std::vector<std::pair<double, double>> sampled(double low, double high, F y) {
  std::vector<std::pair<double, double>> points;
  constexpr int kCount = 48;
  for (int i = 0; i <= kCount; ++i) {
    const double x = low * std::pow(high / low, static_cast<double>(i) / kCount);
    if (const double v = y(x); std::isfinite(v)) points.emplace_back(x, v);
  }
  return points;
}

std::string with_note(const std::string& title, const std::string& chart, const std::string& note) {
  return "<h2>" + svg::escape(title) + "</h2>\n" + chart + "<p class=\"note\">" +
         svg::escape(note) + "</p>\n";
}

// The classic roofline: intensity against GFLOP/s.
std::string flop_roofline(double flops, double bytes, double bandwidth, double peak,
                          double reference_s, double best_s, const std::optional<Profiled>& p) {
  const double intensity = flops / bytes;
  std::vector<svg::Point> points = {
      {intensity, flops / reference_s * 1e-9, "reference",
       fmt::format("reference: {:.4g} GFLOP/s at {:.4g} FLOP/byte", flops / reference_s * 1e-9,
                   intensity)},
      {intensity, flops / best_s * 1e-9, "best",
       fmt::format("best: {:.4g} GFLOP/s at {:.4g} FLOP/byte", flops / best_s * 1e-9, intensity)}};
  double low = intensity, high = intensity;
  if (p) {
    const double measured = flops / p->dram_bytes;
    points.push_back({measured, flops / p->seconds * 1e-9, "profiled",
                      fmt::format("best as profiled: {:.4g} GFLOP/s over its kernel time at "
                                  "{:.4g} FLOP/byte of its measured DRAM traffic ({:.2f}x the "
                                  "minimum)",
                                  flops / p->seconds * 1e-9, measured, p->dram_bytes / bytes)});
    low = std::min(low, measured);
    high = std::max(high, measured);
  }
  std::vector<std::string> missing;
  if (bandwidth > 0 && peak > 0) {
    low = std::min(low, peak / bandwidth);  // the ridge point
    high = std::max(high, peak / bandwidth);
  }
  if (bandwidth <= 0) missing.push_back("no copy bandwidth measured: no memory roof");
  if (peak <= 0) missing.push_back("no f32 peak FLOP/s reported by the device: no compute roof");
  std::vector<svg::Line> lines;
  if (bandwidth > 0 || peak > 0) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    lines.push_back({sampled(low / 30, high * 30,
                             [&](double x) {
                               return std::min(peak > 0 ? peak : inf,
                                               bandwidth > 0 ? bandwidth * x : inf) *
                                      1e-9;
                             }),
                     "roof", false, bandwidth > 0 && peak > 0 ? "roofline" : "roof (partial)"});
  }
  svg::Axes axes{"arithmetic intensity (FLOP/byte of the minimum traffic)", "GFLOP/s", true, true,
                 std::nullopt};
  return with_note(
      "Roofline: reference (grey) and best (green) against the device's copy bandwidth and f32 "
      "peak",
      svg::scatter_plot("roofline", axes, points, lines, missing),
      fmt::format("The task's {:.3g} FLOPs over the {:.3g} bytes a call must move at least; each "
                  "mark at its final-rung median.{}{}",
                  flops, bytes,
                  p ? " Orange: the best at the DRAM traffic and kernel time Nsight Compute "
                      "measured."
                    : "",
                  missing.empty() ? "" : " Not drawn: what the device did not report."));
}

// No FLOP count: the memory roof alone, bytes per call against the GB/s achieved on them.
std::string bandwidth_roofline(double bytes, double bandwidth, double reference_s, double best_s,
                               const std::optional<Profiled>& p) {
  std::vector<svg::Point> points = {
      {bytes, bytes / reference_s * 1e-9, "reference",
       fmt::format("reference: {:.4g} GB/s on the {:.3g} bytes a call moves at least",
                   bytes / reference_s * 1e-9, bytes)},
      {bytes, bytes / best_s * 1e-9, "best",
       fmt::format("best: {:.4g} GB/s on the {:.3g} bytes a call moves at least",
                   bytes / best_s * 1e-9, bytes)}};
  double low = bytes, high = bytes;
  if (p) {
    points.push_back(
        {p->dram_bytes, p->dram_bytes / p->seconds * 1e-9, "profiled",
         fmt::format("best as profiled: {:.4g} GB/s of measured DRAM traffic, "
                     "{:.3g} bytes ({:.2f}x the minimum)",
                     p->dram_bytes / p->seconds * 1e-9, p->dram_bytes, p->dram_bytes / bytes)});
    low = std::min(low, p->dram_bytes);
    high = std::max(high, p->dram_bytes);
  }
  std::vector<std::string> missing = {
      "the task counts no FLOPs: no arithmetic intensity, FLOP/s or compute roof"};
  std::vector<svg::Line> lines;
  if (bandwidth > 0) {
    lines.push_back({{{low / 10, bandwidth * 1e-9}, {high * 10, bandwidth * 1e-9}},
                     "roof",
                     false,
                     "memory roof (copy bandwidth)"});
  } else {
    missing.push_back("no copy bandwidth measured: no memory roof");
  }
  svg::Axes axes{"bytes a call moves (the task's minimum traffic)", "GB/s achieved", true, false,
                 0.0};
  return with_note(
      "Roofline, memory side: reference (grey) and best (green) against the device's copy "
      "bandwidth",
      svg::scatter_plot("roofline", axes, points, lines, missing),
      "Without a FLOP count (no flops in the task) a kernel cannot be placed by intensity: each "
      "mark is the bandwidth achieved on the task's minimum traffic at its final-rung median, "
      "under the memory roof it would meet if it were memory-bound." +
          std::string(p ? " Orange: the best at the DRAM traffic and kernel time Nsight Compute "
                          "measured."
                        : ""));
}

}  // namespace

std::string roofline_section(const json& result) {
  const json& device = result.value("device", json::object());
  const double bandwidth = number_at(device, "copy_bytes_per_s");
  const double peak =
      device.is_object() ? number_at(device.value("peak_flops_per_s", json::object()), "f32") : 0.0;
  const double bytes = number_at(result, "bytes_moved");
  const double flops = number_at(result, "flops");
  const json& final = result.value("final", json());
  const double reference_s =
      final.is_object() ? number_at(final.value("reference", json::object()), "median_ms") * 1e-3
                        : 0.0;
  const double best_s =
      final.is_object() ? number_at(final.value("best", json::object()), "median_ms") * 1e-3 : 0.0;
  if (reference_s <= 0 || best_s <= 0) return "";  // no final rung: nothing measured to place
  const std::optional<Profiled> p = profiled(result.value("profile", json()));
  if (flops > 0 && bytes > 0) {
    return flop_roofline(flops, bytes, bandwidth, peak, reference_s, best_s, p);
  }
  if (bytes > 0) return bandwidth_roofline(bytes, bandwidth, reference_s, best_s, p);
  return "<h2>Roofline</h2>\n<p class=\"note\">The run recorded neither the task's FLOPs nor "
         "the bytes it moves: nothing to place on a roofline.</p>\n";
}

}  // namespace kforge::report

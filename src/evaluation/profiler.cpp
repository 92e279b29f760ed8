#include "evaluation/profiler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/mapped_file.h"
#include "worker/candidate_router.h"

namespace kforge::evaluation {
namespace {

constexpr double kLimiterPercent = 60.0;

/// Splits one CSV line (RFC 4180 quoting: "a","b ""c""",d) into fields.
std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(std::move(field));
  return fields;
}

/// The number in `text` ("1,234.5" with thousands separators too), or nullopt.
std::optional<double> parse_number(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

double sum_of(const std::vector<KernelProfile>& kernels, const std::string& metric) {
  double total = 0.0;
  for (const KernelProfile& k : kernels) {
    if (auto it = k.metrics.find(metric); it != k.metrics.end()) total += it->second;
  }
  return total;
}

/// Duration-weighted mean of a percentage metric over the kernels.
double weighted_percent(const std::vector<KernelProfile>& kernels, const std::string& metric) {
  double weighted = 0.0, time = 0.0;
  for (const KernelProfile& k : kernels) {
    const auto value = k.metrics.find(metric);
    const auto duration = k.metrics.find("gpu__time_duration.sum");
    if (value == k.metrics.end() || duration == k.metrics.end()) continue;
    weighted += value->second * duration->second;
    time += duration->second;
  }
  return time > 0 ? weighted / time : 0.0;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The last `lines` non-empty lines of ncu's output, each after " | ", for a message ("" when
/// there is none).
std::string tail_lines(const std::string& text, int lines) {
  std::vector<std::string> kept;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    kept.push_back(line);
    if (static_cast<int>(kept.size()) > lines) kept.erase(kept.begin());
  }
  std::string joined;
  for (const std::string& line : kept) joined += " | " + line;
  return joined;
}

}  // namespace

const std::vector<std::string>& profile_metrics() {
  static const std::vector<std::string> metrics = {
      "gpu__time_duration.sum",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "lts__t_sector_hit_rate.pct",
      "launch__registers_per_thread",
      "launch__occupancy_limit_registers",
      "launch__occupancy_limit_shared_mem",
      "launch__occupancy_limit_warps",
      "launch__occupancy_limit_blocks",
  };
  return metrics;
}

nlohmann::json ProfileReport::to_json() const {
  nlohmann::json j = {{"ok", ok}, {"message", message}, {"workload", workload},
                      {"seconds", seconds}, {"diagnosis", diagnosis}};
  j["kernels"] = nlohmann::json::array();
  for (const KernelProfile& k : kernels) {
    j["kernels"].push_back({{"name", k.name}, {"grid", k.grid}, {"block", k.block},
                            {"metrics", k.metrics}});
  }
  return j;
}

std::vector<KernelProfile> parse_ncu_csv(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.emplace_back(text.substr(start, end == std::string_view::npos ? text.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  size_t header = 0;
  while (header < lines.size() && lines[header].rfind("\"ID\"", 0) != 0) ++header;
  if (header == lines.size()) {
    throw Error("ncu output has no CSV header (a line starting with \"ID\"): no kernel was "
                "profiled or ncu failed");
  }
  const std::vector<std::string> columns = split_csv_line(lines[header]);
  const auto column = [&](const std::string& name) -> int {
    const auto it = std::find(columns.begin(), columns.end(), name);
    return it == columns.end() ? -1 : static_cast<int>(it - columns.begin());
  };
  const int name_column = column("Kernel Name");
  const int grid_column = column("Grid Size");
  const int block_column = column("Block Size");
  std::vector<KernelProfile> kernels;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    if (lines[i].empty() || lines[i].rfind("==", 0) == 0) continue;
    const std::vector<std::string> fields = split_csv_line(lines[i]);
    if (fields.size() != columns.size()) continue;
    if (fields[0].empty() || !parse_number(fields[0])) continue;  // the units line has no ID
    KernelProfile kernel;
    if (name_column >= 0) kernel.name = fields[static_cast<size_t>(name_column)];
    if (grid_column >= 0) kernel.grid = fields[static_cast<size_t>(grid_column)];
    if (block_column >= 0) kernel.block = fields[static_cast<size_t>(block_column)];
    for (size_t c = 0; c < columns.size(); ++c) {
      if (columns[c].find("__") == std::string::npos) continue;  // not a metric column
      if (auto value = parse_number(fields[c])) kernel.metrics[columns[c]] = *value;
    }
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

std::vector<std::string> diagnose(const std::vector<KernelProfile>& kernels,
                                  double minimum_bytes) {
  std::vector<std::string> findings;
  if (kernels.empty()) return findings;
  const double dram = weighted_percent(kernels, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  const double sm = weighted_percent(kernels, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  const double memory =
      weighted_percent(kernels, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  const double time_us = sum_of(kernels, "gpu__time_duration.sum") * 1e-3;
  findings.push_back(fmt::format("{} kernel launch(es), {:.1f} us on the device", kernels.size(),
                                 time_us));
  if (dram >= kLimiterPercent && dram >= sm) {
    findings.push_back(fmt::format(
        "memory-bound: DRAM throughput {:.0f}% of peak (SM {:.0f}%); gains now come from moving "
        "fewer bytes",
        dram, sm));
  } else if (memory >= kLimiterPercent && memory >= sm) {
    findings.push_back(fmt::format(
        "memory-bound below DRAM: the busiest memory unit (L1/L2/shared) at {:.0f}% of peak, DRAM "
        "{:.0f}%; look at access patterns and bank conflicts",
        memory, dram));
  } else if (sm >= kLimiterPercent) {
    findings.push_back(fmt::format(
        "compute-bound: SM throughput {:.0f}% of peak (DRAM {:.0f}%); gains now come from fewer "
        "or cheaper instructions, or tensor cores",
        sm, dram));
  } else {
    findings.push_back(fmt::format(
        "latency-bound: neither memory ({:.0f}% DRAM, {:.0f}% busiest unit) nor SMs ({:.0f}%) "
        "above {:.0f}% of peak; more parallelism, fewer dependent steps or fewer launches",
        dram, memory, sm, kLimiterPercent));
  }
  const double dram_bytes =
      sum_of(kernels, "dram__bytes_read.sum") + sum_of(kernels, "dram__bytes_write.sum");
  if (dram_bytes > 0 && minimum_bytes > 0) {
    findings.push_back(fmt::format(
        "DRAM traffic {:.3g} MB, {:.2f}x the {:.3g} MB the task must move at least", dram_bytes * 1e-6,
        dram_bytes / minimum_bytes, minimum_bytes * 1e-6));
  }
  if (const double occupancy =
          weighted_percent(kernels, "sm__warps_active.avg.pct_of_peak_sustained_active");
      occupancy > 0) {
    const KernelProfile& longest = *std::max_element(
        kernels.begin(), kernels.end(), [](const KernelProfile& a, const KernelProfile& b) {
          return a.metrics.count("gpu__time_duration.sum") &&
                 b.metrics.count("gpu__time_duration.sum") &&
                 a.metrics.at("gpu__time_duration.sum") < b.metrics.at("gpu__time_duration.sum");
        });
    std::string limit;
    double lowest = 1e30;
    for (const auto& [metric, what] :
         std::vector<std::pair<std::string, std::string>>{
             {"launch__occupancy_limit_registers", "registers"},
             {"launch__occupancy_limit_shared_mem", "shared memory"},
             {"launch__occupancy_limit_warps", "warps per block"},
             {"launch__occupancy_limit_blocks", "blocks per SM"}}) {
      if (auto it = longest.metrics.find(metric); it != longest.metrics.end() && it->second < lowest) {
        lowest = it->second;
        limit = what;
      }
    }
    std::string line = fmt::format("achieved occupancy {:.0f}% of the SM's warps", occupancy);
    if (!limit.empty()) {
      line += fmt::format("; the longest kernel's blocks per SM are limited by {} ({:.0f})", limit,
                          lowest);
    }
    if (auto it = longest.metrics.find("launch__registers_per_thread"); it != longest.metrics.end()) {
      line += fmt::format(", {:.0f} registers per thread", it->second);
    }
    findings.push_back(line);
  }
  if (const double hit = weighted_percent(kernels, "lts__t_sector_hit_rate.pct"); hit > 0) {
    findings.push_back(fmt::format("L2 hit rate {:.0f}%", hit));
  }
  return findings;
}

std::optional<std::string> find_ncu() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty()) candidates.push_back(dir + "/ncu");
    }
  }
  if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back(std::string(home) + "/bin/ncu");
  candidates.push_back("/usr/local/cuda/bin/ncu");
  for (const std::string& candidate : candidates) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::vector<std::string> ncu_command(const std::string& ncu_path, const std::string& log_path,
                                     const std::string& nvtx_range) {
  std::string metrics;
  for (const std::string& metric : profile_metrics()) metrics += (metrics.empty() ? "" : ",") + metric;
  // --clock-control none: the device keeps its own clocks, as during timing (and the lent GPU
  // machines ask for it).
  std::vector<std::string> command = {ncu_path,
                                      "--csv",
                                      "--page", "raw",
                                      "--print-units", "base",
                                      "--clock-control", "none",
                                      "--target-processes", "all",
                                      "--log-file", log_path,
                                      "--metrics", metrics};
  if (!nvtx_range.empty()) {
    command.insert(command.end(), {"--nvtx", "--nvtx-include", nvtx_range + "/"});
  }
  return command;
}

NcuProfiler::NcuProfiler(worker::ProcessWorkerConfig worker, std::string ncu_path,
                         ScratchDir& scratch, double timeout_s)
    : worker_(std::move(worker)), ncu_path_(std::move(ncu_path)), scratch_(scratch),
      timeout_s_(timeout_s) {}

void NcuProfiler::set_python_worker(worker::ProcessWorkerConfig python, double load_timeout_s) {
  python_worker_ = std::move(python);
  python_load_timeout_s_ = load_timeout_s;
}

ProfileReport NcuProfiler::profile(const compile::Artifact& candidate, const Task& task,
                                   const Workload& workload, const ProfileInputs& inputs) {
  const auto start = std::chrono::steady_clock::now();
  ProfileReport report;
  report.workload = workload.name;
  const bool python = worker::is_python_candidate(candidate.path);
  if (python && !python_worker_) {
    report.message = "not profiled: this profiler has no Python candidate worker for a ModelNew";
    return report;
  }
  const std::string log_path = scratch_.next_file("ncu") + ".csv";
  worker::ProcessWorkerConfig config = python ? *python_worker_ : worker_;
  config.measure_device = false;
  config.launcher = ncu_command(ncu_path_, log_path, python ? kProfiledRange : "");
  config.startup_timeout_s = std::max(config.startup_timeout_s, 120.0);
  const auto finish = [&](std::string message) {
    report.message = std::move(message);
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::error_code ignored;
    std::filesystem::remove(log_path, ignored);
    return report;
  };
  try {
    worker::ProcessWorker worker(config);
    const worker::LoadResult loaded =
        python ? worker.load({candidate.path, inputs.task_path},
                             std::max(timeout_s_, python_load_timeout_s_))
               : worker.load({candidate.path}, timeout_s_);
    if (loaded.verdict != Verdict::ok) return finish("the candidate did not load: " + loaded.message);
    worker::RunRequest run;
    run.handle = loaded.handle;
    run.signature = task.signature;
    run.workload = workload;
    run.seed = inputs.seed;
    run.provided_dir = inputs.provided_dir;
    // A Python candidate: a warm-up call, then the one ncu counts (its forward in the range).
    run.calls = python ? 2 : 1;
    if (python) run.nvtx_range = kProfiledRange;
    run.late_write_wait_ms = 0.0;
    run.host_inputs = true;
    run.output_path = scratch_.next_file("profile");
    create_private_file(run.output_path);
    const worker::RunResult result = worker.run(run, timeout_s_);
    std::error_code ignored;
    std::filesystem::remove(run.output_path, ignored);
    worker.shutdown();  // ncu writes its report when the worker exits
    if (result.verdict != Verdict::ok) {
      return finish("the profiled call failed: " + result.message +
                    tail_lines(read_text(log_path), 5));
    }
  } catch (const Error& e) {
    return finish(std::string("could not run the candidate under ncu: ") + e.what() +
                  tail_lines(read_text(log_path), 5));
  }
  const std::string output = read_text(log_path);
  try {
    report.kernels = parse_ncu_csv(output);
  } catch (const Error& e) {
    return finish(std::string(e.what()) + "; ncu said:" + tail_lines(output, 6));
  }
  if (report.kernels.empty()) {
    return finish(std::string("ncu profiled no kernel") +
                  (python ? " in the forward call's NVTX range" : "") +
                  "; ncu said:" + tail_lines(output, 6));
  }
  const bool counted = std::any_of(report.kernels.begin(), report.kernels.end(),
                                   [](const KernelProfile& k) { return !k.metrics.empty(); });
  if (!counted) {
    return finish("ncu ran the kernels but read no counter (profiling may be restricted to "
                  "administrators, or the GPU virtualized); ncu said:" + tail_lines(output, 6));
  }
  report.ok = true;
  report.diagnosis =
      diagnose(report.kernels, static_cast<double>(bytes_per_call(task, workload)));
  return finish("");
}

}  // namespace kforge::evaluation

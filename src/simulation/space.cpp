#include "simulation/space.h"

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/files.h"

namespace kforge::simulation {

const PointRecord* SpaceRecord::find(const std::string& key) const {
  for (const PointRecord& point : points) {
    if (point.job_key == key) return &point;
  }
  return nullptr;
}

const PointRecord* SpaceRecord::best() const {
  const PointRecord* best = nullptr;
  for (const PointRecord& point : points) {
    if (point.verdict != Verdict::ok || !point.full_geomean_speedup) continue;
    if (best == nullptr || *point.full_geomean_speedup > *best->full_geomean_speedup) {
      best = &point;
    }
  }
  return best;
}

std::string job_key(const compile::CompileJob& job) {
  std::string key = job.source_name;
  for (const auto& [name, value] : job.defines) key += ";" + name + "=" + value;  // map: sorted
  return key;
}

std::vector<generation::TemplatePoint> all_points(const generation::KernelFamily& family) {
  std::vector<generation::TemplatePoint> points;
  for (const generation::TemplateVariant& variant : family.variants) {
    std::vector<generation::TemplatePoint> partial = {{variant.name, {}}};
    for (const generation::TemplateParam& param : variant.params) {
      std::vector<generation::TemplatePoint> next;
      for (const generation::TemplatePoint& point : partial) {
        for (const std::string& value : param.values) {
          generation::TemplatePoint extended = point;
          extended.params[param.name] = value;
          next.push_back(std::move(extended));
        }
      }
      partial = std::move(next);
    }
    points.insert(points.end(), partial.begin(), partial.end());
  }
  return points;
}

void to_json(nlohmann::json& j, const PointRecord& p) {
  nlohmann::json full = nlohmann::json::array();
  for (const WorkloadTiming& w : p.full) {
    full.push_back({{"workload", w.workload}, {"samples_ms", w.samples_ms},
                    {"reference_median_ms", w.reference_median_ms}});
  }
  j = {{"id", p.id}, {"job_key", p.job_key}, {"variant", p.variant},
       {"decomposition", p.decomposition}, {"params", p.params},
       {"verdict", to_string(p.verdict)}, {"message", p.message}, {"compile_s", p.compile_s},
       {"gate_s", p.gate_s}, {"quick_s", p.quick_s}, {"quick_samples_ms", p.quick_samples_ms},
       {"gate_full_size_s", p.gate_full_size_s},
       {"gate_full_size_failed", p.gate_full_size_failed},
       {"full_s", p.full_s}, {"full", full},
       {"full_geomean_speedup", p.full_geomean_speedup ? nlohmann::json(*p.full_geomean_speedup)
                                                       : nlohmann::json()}};
}

void from_json(const nlohmann::json& j, PointRecord& p) {
  p.id = j.at("id").get<std::string>();
  p.job_key = j.at("job_key").get<std::string>();
  p.variant = j.at("variant").get<std::string>();
  p.decomposition = j.value("decomposition", p.variant);
  p.params = j.at("params").get<std::map<std::string, std::string>>();
  p.verdict = parse_verdict(j.at("verdict").get<std::string>());
  p.message = j.value("message", "");
  p.compile_s = j.value("compile_s", 0.0);
  p.gate_s = j.value("gate_s", 0.0);
  p.gate_full_size_s = j.value("gate_full_size_s", 0.0);
  p.gate_full_size_failed = j.value("gate_full_size_failed", false);
  p.quick_s = j.value("quick_s", 0.0);
  p.quick_samples_ms = j.value("quick_samples_ms", std::vector<double>{});
  p.full_s = j.value("full_s", 0.0);
  p.full.clear();
  for (const nlohmann::json& w : j.value("full", nlohmann::json::array())) {
    p.full.push_back({w.at("workload").get<std::string>(),
                      w.at("samples_ms").get<std::vector<double>>(),
                      w.at("reference_median_ms").get<double>()});
  }
  p.full_geomean_speedup.reset();
  if (j.contains("full_geomean_speedup") && j["full_geomean_speedup"].is_number()) {
    p.full_geomean_speedup = j["full_geomean_speedup"].get<double>();
  }
}

void to_json(nlohmann::json& j, const SpaceRecord& s) {
  j = {{"version", s.version}, {"task", s.task}, {"task_path", s.task_path},
       {"task_hash", s.task_hash}, {"family", s.family}, {"backend", s.backend},
       {"dtype", s.dtype}, {"device", s.device}, {"toolchain", s.toolchain},
       {"measured_at", s.measured_at}, {"commit", s.commit},
       {"timed_workload", s.timed_workload},
       {"reference_quick_samples_ms", s.reference_quick_samples_ms},
       {"reference_quick_s", s.reference_quick_s},
       {"deferred_timed_gate", s.deferred_timed_gate}, {"points", s.points}};
}

void from_json(const nlohmann::json& j, SpaceRecord& s) {
  s.version = j.at("version").get<int>();
  s.task = j.at("task").get<std::string>();
  s.task_path = j.at("task_path").get<std::string>();
  s.task_hash = j.value("task_hash", "");
  s.family = j.at("family").get<std::string>();
  s.backend = j.at("backend").get<std::string>();
  s.dtype = j.value("dtype", "f32");
  s.device = j.value("device", "");
  s.toolchain = j.value("toolchain", "");
  s.measured_at = j.value("measured_at", "");
  s.commit = j.value("commit", "");
  s.timed_workload = j.at("timed_workload").get<std::string>();
  s.reference_quick_samples_ms = j.at("reference_quick_samples_ms").get<std::vector<double>>();
  s.reference_quick_s = j.value("reference_quick_s", 0.0);
  s.deferred_timed_gate = j.value("deferred_timed_gate", false);
  s.points = j.at("points").get<std::vector<PointRecord>>();
}

SpaceRecord load_space(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw Error(path + ": no such space file (expected the JSON `kforge_bench_measure_space` "
                "writes)");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not JSON (" + e.what() + ")");
  }
  if (j.value("version", 0) != 1) {
    throw Error(path + ": space file version " + j.value("version", nlohmann::json()).dump() +
                " (this kforge reads version 1)");
  }
  try {
    return j.get<SpaceRecord>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": malformed space file (" + e.what() + ")");
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

void save_space(const SpaceRecord& space, const std::string& path) {
  write_file_atomically(path, nlohmann::json(space).dump(1) + "\n");
}

}  // namespace kforge::simulation

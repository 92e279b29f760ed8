// OptimizeResult::to_json: result.json's schema (report/summary.cpp renders it).
#include "search/optimizer.h"

namespace kforge::search {

namespace {

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

nlohmann::json record_json(const CandidateRecord& r) {
  nlohmann::json j = {{"index", r.index},          {"step", r.step},
                      {"id", r.id},                {"parent", r.parent_id},
                      {"change", r.change},        {"direction", r.direction_id},
                      {"strategy", r.strategy_id}, {"verdict", to_string(r.verdict)},
                      {"message", r.message},      {"artifact_key", r.artifact_key},
                      {"compile_s", r.compile_s},  {"source", r.source_file}};
  j["median_ms"] = optional_json(r.median_ms);
  j["log_gain"] = optional_json(r.log_gain);
  j["acceptance"] = r.acceptance ? to_string(*r.acceptance) : "";
  j["full_geomean_speedup"] = optional_json(r.full_geomean_speedup);
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& [workload, speedup] : r.full_workloads) {
    workloads.push_back({{"workload", workload}, {"speedup", speedup}});
  }
  j["full_workload_speedups"] = workloads;
  j["device_s"] = r.device_s;
  j["quick_score"] = r.quick_score;
  // The reference around its quick timing (QuickReference): its rung-1 speedup, interval and
  // outcome; null where none was timed (the run's reference_timed median stands in).
  j["quick_reference"] = r.quick_reference ? nlohmann::json(*r.quick_reference) : nlohmann::json();
  j["promotion"] = r.promotion ? to_string(*r.promotion) : "";
  j["rung"] = rung_number(r.rung);
  j["found_device_s"] = r.found_device_s;
  j["found_wall_s"] = r.found_wall_s;
  // "same as #N": not evaluated, the original's verdict and numbers (optimizer.h).
  j["duplicate_of"] = r.duplicate_of.empty() ? nlohmann::json() : nlohmann::json(r.duplicate_of);
  if (!r.duplicate_of.empty()) j["duplicate_of_index"] = r.duplicate_of_index;
  j["support"] = r.support ? nlohmann::json(*r.support) : nlohmann::json();
  return j;
}

}  // namespace

nlohmann::json OptimizeResult::to_json() const {
  nlohmann::json j;
  j["run_dir"] = run_dir;
  j["backend"] = backend;
  j["device"] = device;
  j["toolchain"] = toolchain;
  j["precision"] = precision;
  j["wall_s"] = wall_s;
  j["phases_s"] = phases_s;
  j["startup_s"] = startup_s;
  j["bytes_moved"] = bytes_moved;
  j["task_warnings"] = task_warnings;
  j["flops"] = optional_json(flops);
  j["generation_failures"] = generation_failures;
  j["stopped_early"] = stopped_early;
  j["stopped_by"] = to_string(stopped_by);
  j["budget"] = budget;
  j["interrupted"] = interrupted;
  j["final_skipped"] = final_skipped;
  j["replayed_candidates"] = replayed_candidates;
  j["fidelity"] = fidelity;
  j["eta"] = eta;
  j["rung_occupancy"] = rung_occupancy;
  // What finding the final best cost: the budget spent when its rung 1 ended (bench/ladder
  // compares this across fidelities).
  j["to_final_best"] = best ? nlohmann::json{{"candidate", best->id},
                                             {"index", best->index},
                                             {"device_s", best->found_device_s},
                                             {"wall_s", best->found_wall_s}}
                            : nlohmann::json();
  j["candidates"] = nlohmann::json::array();
  for (const CandidateRecord& r : candidates) j["candidates"].push_back(record_json(r));
  if (best) {
    j["best"] = record_json(*best);
    j["best"]["source"] = best_source_path;
    // From the hint it descends from to the best: each move and the memory behind it.
    j["best"]["lineage"] = lineage;
  } else {
    j["best"] = nullptr;
  }
  if (best && !final_skipped) {
    double seconds = best_final.median_ms * 1e-3;
    j["final"] = {{"reference", reference_final},
                  {"best", best_final},
                  {"reference_rounds_ms", reference_final_rounds_ms},
                  {"best_rounds_ms", best_final_rounds_ms},
                  {"speedup", speedup},
                  {"achieved_gbps", bytes_moved / seconds * 1e-9},
                  {"reference_gbps", bytes_moved / (reference_final.median_ms * 1e-3) * 1e-9}};
    if (flops) j["final"]["achieved_gflops"] = *flops / seconds * 1e-9;
    // --baseline compile: the best over torch.compile of the reference (null when none).
    const bool compared = compile_baseline && compile_baseline->best_speedup;
    j["final"]["speedup_vs_compile"] =
        compared ? nlohmann::json(*compile_baseline->best_speedup) : nlohmann::json();
    j["final"]["compile"] = compared && compile_baseline->final
                                ? nlohmann::json(*compile_baseline->final)
                                : nlohmann::json();
  } else {
    j["final"] = nullptr;
  }
  j["baseline"] = compile_baseline ? "compile" : "eager";
  j["compile_baseline"] = compile_baseline ? compile_baseline->to_json() : nlohmann::json();
  j["profile"] = profile ? profile->to_json() : nlohmann::json();
  return j;
}

}  // namespace kforge::search

// Runs recorded in the memory beside the HTG's evidence (schema 3): today the evaluations of
// kernels users wrote themselves (`kforge eval TASK KERNEL --record`, kind "eval"). Such a
// kernel was chosen by no direction or strategy, so it cannot be HTG evidence (Evidence needs a
// direction); it is kept as a run of one candidate with the provenance evidence carries, so that
// `kforge memory show` lists it and a later `kforge optimize` of the same task (task_hash) or
// operator family can find what was already measured there.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "memory/htg.h"

namespace kforge::memory {

/// One candidate of a recorded run, with its outcome. Times in ms.
struct RecordedCandidate {
  std::string candidate_id;  // the built artifact's content key; "" when it did not build
  std::string source_name;   // where its source came from (the user's kernel file, absolute)
  std::string source;        // the source text as evaluated
  std::string verdict;       // to_string(Verdict)
  std::string message;       // why, when the verdict is not ok
  std::string failed_at;     // "screen", "compile", "rungs 0-1", "rung 2", "rung 3"; "" if ok
  std::optional<double> median_ms;            // the final rung's median (ok), else the last
                                              // rung's that timed it, else none
  std::optional<double> reference_median_ms;  // the reference's median beside it
  std::optional<double> speedup;              // reference / candidate at the final rung
  std::optional<double> ci_low;               // the speedup's interval (level below)
  std::optional<double> ci_high;
  std::optional<double> level;  // e.g. 0.95
};

/// One recorded run.
struct RecordedRun {
  int64_t id = 0;             // set by the store
  std::string kind = "eval";  // "eval": `kforge eval --record`
  std::string task;           // the task's name
  std::string command;        // the command line that reproduces it
  Provenance provenance;      // backend, device, toolchain, family, task_hash
  std::vector<RecordedCandidate> candidates;
  std::string created_at;  // ISO-8601 UTC; set by the store when recorded
};

/// JSON of a run, as `kforge memory show --json` and export write it:
/// {"id", "created_at", "kind", "task", "command", "provenance" {backend, device,
/// compute_capability, toolchain, family, task_hash}, "candidates": [{"candidate_id",
/// "source_name", "source", "verdict", "message", "failed_at", "median_ms",
/// "reference_median_ms", "speedup", "ci_low", "ci_high", "level"}]} (absent numbers null).
nlohmann::json to_json(const RecordedRun& run);
/// A Provenance as the memory's JSON documents hold it: {backend, device, compute_capability,
/// toolchain, family, task_hash} (recorded runs and evidence alike).
nlohmann::json provenance_json(const Provenance& p);
/// Reads provenance_json's object; throws nlohmann::json::exception on a missing field.
Provenance provenance_from(const nlohmann::json& p);
/// Reads what to_json wrote (id is ignored). Throws Error naming `where` and the field when a
/// field is missing or of the wrong type.
RecordedRun recorded_run_from(const nlohmann::json& j, const std::string& where);

}  // namespace kforge::memory

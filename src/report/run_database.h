// The run database: everything a run decided and measured, in SQLite inside its run directory
// (`run.sqlite`), written as each thing happens, so that `kforge optimize --resume RUN_DIR`
// continues a run stopped by Ctrl-C, a crash or kill -9 with nothing lost but the candidate in
// flight (issue 5). events.jsonl stays the human-readable log; this file is the one that is read
// back.
//
// Tables (schema version 1, PRAGMA user_version):
//   meta(key, value)                    run configuration: task hash, seed, backend, options
//   candidates(id, ..., evaluation)     one row per evaluated candidate, upserted by id
//   rungs(candidate_id, rung, ...)      every rung a candidate climbed, in order
//   decisions(seq, step, decision)      the policy's choices, as JSON, in order
// Each write is its own transaction in WAL mode: a kill -9 loses at most the write in progress.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kforge::report {

/// One evaluated candidate, enough to skip re-evaluating it on resume.
struct CandidateRow {
  std::string id;                   // unique within the run
  int index = 0;                    // order of evaluation
  int step = 0;
  std::string parent_id;
  std::string direction_id;
  std::string strategy_id;
  std::string change;
  std::string verdict;              // to_string(Verdict)
  std::string message;
  std::string artifact_key;
  double compile_s = 0.0;
  std::optional<double> median_ms;  // quick-rung median, ms
  std::optional<double> log_gain;   // ln(parent median / this median)
  nlohmann::json evaluation;        // the full evaluation record (rungs, samples, timing)
};

/// One rung of one candidate.
struct RungRow {
  std::string candidate_id;
  std::string rung;                 // "gate", "quick", "full", "final"
  std::string verdict;
  double seconds = 0.0;
  nlohmann::json detail;
};

class RunDatabase {
 public:
  /// Opens `path`, creating it with the current schema when absent. Throws Error naming the
  /// file when it is not a kforge run database, was written by a newer kforge (a schema version
  /// above kSchemaVersion), or cannot be opened.
  static std::unique_ptr<RunDatabase> open(const std::filesystem::path& path);
  ~RunDatabase();
  RunDatabase(const RunDatabase&) = delete;
  RunDatabase& operator=(const RunDatabase&) = delete;

  static constexpr int kSchemaVersion = 1;

  /// Run configuration, one value per key (replaced when set again).
  void set_meta(const std::string& key, const nlohmann::json& value);
  std::optional<nlohmann::json> meta(const std::string& key) const;

  /// Inserts or replaces the candidate with `row.id`.
  void record_candidate(const CandidateRow& row);
  std::optional<CandidateRow> candidate(const std::string& id) const;
  /// Every candidate, by index.
  std::vector<CandidateRow> candidates() const;

  void record_rung(const RungRow& row);
  std::vector<RungRow> rungs(const std::string& candidate_id) const;

  /// Appends one decision of the policy or the scheduler (why a candidate was proposed,
  /// promoted, pruned).
  void record_decision(int step, const nlohmann::json& decision);
  std::vector<nlohmann::json> decisions() const;

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Impl;
  explicit RunDatabase(std::filesystem::path path);
  std::filesystem::path path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::report

// The hierarchical transition graph (HTG) of HTAM: directions (global nodes), strategies (local
// nodes) and transition edges between directions, plus the evidence of every attempt.
//
// Source: HTAM, "Hierarchical Transition-Attended Memory" (see ../shared/DESIGN.md): global nodes
// hold static priors and runtime statistics; local nodes hold edit patterns and evidence;
// transition edges hold path-dependent evidence about moving from one direction to the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kforge::memory {

/// One concrete change to a template candidate, as a strategy prescribes it. Parameters are the
/// kernel family's compile-time knobs (kernels/<backend>/<family>/family.toml).
///   op = "set"      : param := value
///   op = "increase" : param := next larger allowed value
///   op = "decrease" : param := next smaller allowed value
///   op = "max"/"min": param := largest / smallest allowed value
///   op = "variant"  : switch to the variant whose name or decomposition equals value
struct ParamEdit {
  std::string param;   // empty for op = "variant"
  std::string op;
  std::string value;   // for "set" and "variant"
};

/// Runtime statistics kept on nodes and edges. Gains are natural logs of speedup over the parent
/// candidate (0 = no change, > 0 = faster); failed attempts count as attempts without success.
struct Stats {
  int64_t attempts = 0;
  int64_t successes = 0;          // verdict ok and faster than the parent
  int64_t ok_attempts = 0;        // attempts with verdict ok and a log gain (mean's denominator)
  double mean_log_gain = 0.0;     // over attempts with verdict ok
  double ema_log_gain = 0.0;      // exponential moving average, the improvement trend
  std::string last_used;          // ISO-8601 UTC, empty if never
};

/// A global node: a coarse optimization direction ("memory access").
struct Direction {
  std::string id;
  std::string title;
  std::string goal;
  std::vector<std::string> triggers;
  std::vector<std::string> risks;
  std::vector<std::string> backends;  // "cpu", "cuda"
  double prior = 0.0;                 // static prior utility from the knowledge file
  Stats stats;
};

/// A local node: a concrete strategy under one direction ("16-byte vectorized loads").
struct Strategy {
  std::string id;
  std::string direction_id;
  std::string title;
  std::string edit_pattern;              // what to change, in words a generator can follow
  std::vector<std::string> validation;   // what to verify after the edit
  std::vector<std::string> triggers;     // when it applies
  std::vector<ParamEdit> edits;          // the template generator's concrete change
  std::vector<std::string> backends;     // where it applies; a subset of the direction's
  Stats stats;
};

/// A transition edge from one direction to the next.
struct Edge {
  std::string from_direction;
  std::string to_direction;
  std::string rationale;
  std::string risks;
  double prior = 0.0;   // prior utility from the knowledge file (0 if not listed)
  Stats stats;
};

/// Where a piece of evidence was obtained. Evidence from another device or toolchain counts,
/// discounted (full policy: the HTAM issue).
struct Provenance {
  std::string backend;             // "cpu" | "cuda"
  std::string device;              // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
  std::string toolchain;           // "nvcc 13.0.88" / "g++ 12.2.0"
  std::string family;              // operator family
  std::string task_hash;           // hash of the task file
};

/// One attempt: a strategy applied after a previous direction, and what came of it.
struct Evidence {
  std::string direction_id;
  std::string strategy_id;
  std::string previous_direction_id;   // empty at the first step
  Provenance provenance;
  std::string verdict;                 // to_string(Verdict)
  std::optional<double> log_gain;      // ln(parent time / candidate time) when verdict is ok
  std::optional<double> speedup_vs_baseline;
  std::string candidate_id;            // content hash of the candidate
  std::string note;                    // short excerpt of the change or the failure reason
};

}  // namespace kforge::memory

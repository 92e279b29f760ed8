// The hierarchical transition graph (HTG) of HTAM: directions (global nodes), strategies (local
// nodes) and transition edges between directions, plus the evidence of every attempt.
//
// Source: HTAM, "Hierarchical Transition-Attended Memory" (see ../shared/DESIGN.md): global nodes
// hold static priors and runtime statistics; local nodes hold edit patterns and evidence;
// transition edges hold path-dependent evidence about moving from one direction to the next.
#pragma once

#include <array>
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

/// How many earlier steps a transition edge keeps evidence for: lag j = 1..kMaxLag means "the
/// source direction was chosen j steps before the target" (HTAM's prefix of recent directions).
inline constexpr int kMaxLag = 3;

/// Runtime statistics kept on nodes and on each lag of an edge, as raw (undiscounted) counts of
/// every attempt recorded. Gains are natural logs of speedup over the parent candidate (0 = no
/// change, > 0 = faster). Provenance-discounted views for decisions are in weighting.h.
struct Stats {
  int64_t attempts = 0;
  int64_t compile_successes = 0;  // verdict neither compile_error nor rejected_by_policy
  int64_t correct_successes = 0;  // verdict ok (compiled and passed the gate)
  int64_t successes = 0;          // speedup successes: verdict ok and faster than the parent
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

/// A transition edge from one direction to the next, with its evidence kept per lag:
/// by_lag[j - 1] holds the attempts of `to_direction` made when `from_direction` had been chosen
/// j steps earlier (j = 1: immediately before).
struct Edge {
  std::string from_direction;
  std::string to_direction;
  std::string rationale;
  std::string risks;
  double prior = 0.0;   // prior utility from the knowledge file (0 if not listed)
  std::array<Stats, kMaxLag> by_lag;
};

/// Where a piece of evidence was obtained. Evidence from another device, toolchain or operator
/// family counts, discounted (weighting.h, ProvenanceWeights).
struct Provenance {
  std::string backend;             // "cpu" | "cuda"
  std::string device;              // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
  std::string toolchain;           // "nvcc 13.0.88" / "g++ 12.2.0"
  std::string family;              // operator family
  std::string task_hash;           // hash of the task file
};

/// One attempt: a strategy applied after a prefix of earlier directions, and what came of it.
/// Positive evidence has log_gain > 0; negative evidence is everything else (slower, or failed
/// with a failure_reason).
struct Evidence {
  std::string direction_id;
  std::string strategy_id;             // empty when only the direction is known
  /// Directions chosen before this attempt, most recent first: prefix[j - 1] was chosen j steps
  /// earlier. Empty at the first step; the store keeps the first kMaxLag entries.
  std::vector<std::string> prefix;
  Provenance provenance;
  std::string verdict;                 // to_string(Verdict)
  std::optional<double> log_gain;      // ln(parent time / candidate time) when verdict is ok
  std::optional<double> speedup_vs_baseline;
  std::string candidate_id;            // content hash of the candidate
  std::string excerpt;                 // short description of the change
  std::string failure_reason;          // verdict message when the attempt failed, else empty
  std::string diagnosis;               // Diagnosis::summary() the strategy was chosen under
  std::string created_at;              // ISO-8601 UTC; set by the store when recorded
};

}  // namespace kforge::memory

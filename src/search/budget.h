// The run's budget: the search stops at the first candidate boundary where any limit is spent,
// whichever comes first of
//   steps        T search steps after the expert hints (HTAM's setting, default 6)
//   wall         seconds the orchestrator has been running this run (summed over sessions
//                when a run is resumed)
//   device       seconds the candidate workers spent evaluating: the wall time of every rung
//                they ran (gate, quick, acceptance comparisons, rung 2), summed over the workers
//                of a pool; the reference's timings and the final rung are not counted, they
//                are the same for any search
//   candidates   candidates evaluated (expert hints, step candidates and repairs)
//   cost         US dollars the LLM plane has spent (its price table; 0 for templates)
// With a worker pool (worker_pool.h), the candidates of a batch already running finish, so the
// device and wall spend can pass a limit by up to one batch (at most proposals_per_step
// candidates); the candidate limit is never passed. A limit that is not set does not stop
// anything. After a budget stop the candidates already evaluated are still promoted or pruned
// (the promoted run rung 2) and the final rung runs on the best so far: a budget bounds the
// search, not the verdict.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kforge::search {

/// Limits other than the step count (which is OptimizeOptions::steps). Unset: no limit. Each
/// set value must be > 0 (validate()).
struct BudgetLimits {
  std::optional<double> max_wall_s;
  std::optional<double> max_device_s;
  std::optional<int> max_candidates;
  std::optional<double> max_cost_usd;
  /// Throws Error naming the flag (--max-wall-s, ...) when a set value is zero, negative or
  /// not finite.
  void validate() const;
};

/// What was spent so far, in the limits' units.
struct BudgetSpend {
  int steps = 0;          // search steps started
  double wall_s = 0.0;
  double device_s = 0.0;
  int candidates = 0;
  double cost_usd = 0.0;
};

/// Which limit stopped the search (or what else did). `none` while it runs.
enum class StopReason {
  none,
  steps,           // all T steps ran
  max_wall_s,
  max_device_s,
  max_candidates,
  max_cost_usd,
  interrupted,     // Ctrl-C
  generator,       // the generator can write nothing more (its own reason is in `detail`)
  exhausted,       // no applicable strategy is left on any correct candidate
  no_correct,      // no expert hint passed the gate: nothing to refine
};
/// "steps", "max_wall_s", ..., "interrupted".
std::string to_string(StopReason reason);

/// Adds up the spend and says when a limit is reached. Not thread-safe (the loop owns it).
class BudgetTracker {
 public:
  /// `now_s` returns a monotonic time in seconds (tests pass a fake); `cost_usd` the LLM cost
  /// spent in this session (null: 0). `prior` is what earlier sessions of a resumed run spent on
  /// wall time and cost (its other fields are ignored: they are replayed candidate by candidate).
  BudgetTracker(int steps, BudgetLimits limits, std::function<double()> now_s,
                std::function<double()> cost_usd, BudgetSpend prior = {});

  void add_candidate(double device_s);
  void add_device_s(double device_s);
  void start_step() { ++spend_.steps; }

  /// The spend now (wall and cost read at the call).
  BudgetSpend spend() const;
  /// The first limit that is spent, or none. `steps` is reported once every step started.
  StopReason exceeded() const;
  /// "steps 2/6, wall 12.3 s of 60, device 4.1 s, candidates 9 of 20, cost $0.0000" — the
  /// progress line's budget part.
  std::string describe() const;
  /// {"limits": {...}, "spent": {...}} for result.json (stopped_by is added by the caller).
  nlohmann::json to_json() const;

  int steps() const { return steps_; }
  const BudgetLimits& limits() const { return limits_; }

 private:
  int steps_;
  BudgetLimits limits_;
  std::function<double()> now_s_;
  std::function<double()> cost_usd_;
  BudgetSpend prior_;
  double started_s_;
  BudgetSpend spend_;  // steps, device_s, candidates of this run (replayed ones included)
};

}  // namespace kforge::search

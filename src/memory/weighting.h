// Provenance discounting and the weighted statistics that decisions use.
//
// The store keeps raw counts (htg.h, Stats). A decision, however, is made for one context (this
// device, this toolchain, this operator family), and evidence from elsewhere transfers only in
// part: a change that paid on an A100 may not on an H200, and a trick for softmax says less about
// gemv. Each evidence row therefore gets a weight in [0, 1] (evidence_weight) and the policy reads
// weighted statistics (WeightedStats) accumulated over the rows, oldest first. With every row at
// weight 1 the weighted statistics equal the raw ones the store keeps.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memory/htg.h"
#include "memory/store.h"

namespace kforge::memory {

/// Weight of the newest observation in every exponential moving average of log gain (raw and
/// weighted): a memory of about 1 / 0.3 ~ 3 attempts (half-life ~2), so the trend turns within
/// one HTAM run of ~6 steps while one noisy measurement moves it by only 30%.
inline constexpr double kEmaWeight = 0.3;

/// How much evidence from another context counts. Factors multiply:
///   weight = device factor * toolchain factor * family factor, with
///   device factor    = 1 if device name and compute capability equal the current ones, else
///                      other_device
///   toolchain factor = 1 if the toolchain string is equal, else other_toolchain
///   family factor    = 1 for the same operator family, similar_family when both families are in
///                      one group of similar_families, else other_family
/// Evidence of another backend never counts (its strategies and costs are different).
/// All factors must lie in [0, 1] (validate()).
struct ProvenanceWeights {
  // Defaults: the sign of a change's effect transfers across devices more often than its size,
  // so another device's observation is worth half of one made here; a compiler upgrade changes
  // code generation less than a device does (0.8); a similar operator (same memory pattern, e.g.
  // row-wise reductions) is a useful hint (0.7), an unrelated one a weak one (0.3).
  double other_device = 0.5;
  double other_toolchain = 0.8;
  double similar_family = 0.7;
  double other_family = 0.3;
  /// Groups of operator families whose evidence transfers as "similar"; a family may appear in
  /// several groups. Default: row-wise reductions together, matrix-vector products together.
  /// Names are kernels/<backend>/<family> folder names (validate_families checks them).
  std::vector<std::vector<std::string>> similar_families = {
      {"softmax", "log_softmax", "rmsnorm", "rmsnorm_channels", "layernorm"}, {"gemv", "gemv_t"}};

  /// Throws Error naming the field when a factor is outside [0, 1] or not finite.
  void validate() const;
  /// Throws Error naming the family when a similar_families group names one not in `known`
  /// (the families kforge has kernels for): a misspelt name would silently weigh that family's
  /// evidence as unrelated (0.3) instead of similar.
  void validate_families(const std::vector<std::string>& known) const;
};

/// The weight in [0, 1] of `evidence` for a decision made in `current` (formula above).
double evidence_weight(const Provenance& evidence, const Provenance& current,
                       const ProvenanceWeights& weights);

/// Statistics over weighted evidence rows (weights w_i in [0, 1], rows oldest first):
///   attempts      = sum_i w_i
///   gain_weight   = sum_i w_i over rows with verdict ok and a log gain x_i
///   mean_log_gain = sum_i w_i x_i / gain_weight             (0 when gain_weight = 0)
///   ema_log_gain  : ema <- ema + kEmaWeight * w_i * (x_i - ema), starting at 0
///   successes     = sum_i w_i over rows with verdict ok and x_i > 0
/// With all w_i = 1 these are Stats' attempts, ok_attempts, mean, ema and successes.
struct WeightedStats {
  double attempts = 0.0;
  double gain_weight = 0.0;
  double mean_log_gain = 0.0;
  double ema_log_gain = 0.0;
  double successes = 0.0;

  /// Adds one row of weight `weight` (ignored when weight <= 0).
  void add(const Evidence& evidence, double weight);
};

/// A read-only snapshot of the graph for one decision context: the backend's directions and
/// strategies with priors, every edge, and the weighted statistics of nodes and of each edge lag
/// computed from the evidence of that backend. Built once per decision from a Store.
class MemoryView {
 public:
  /// Reads the store (errors are the store's). `context` is the provenance of the decision
  /// (backend, device, toolchain, family); its backend selects directions and evidence.
  static MemoryView load(Store& store, const Provenance& context, const ProvenanceWeights& weights);

  /// Directions of the context's backend, in store order.
  const std::vector<Direction>& directions() const { return directions_; }
  /// Strategies under `direction_id` that fit the backend, in store order.
  std::vector<Strategy> strategies(const std::string& direction_id) const;
  /// The edge from -> to, or nullptr when the graph has none.
  const Edge* edge(const std::string& from, const std::string& to) const;

  /// Weighted statistics; all zero for a node or edge lag without evidence.
  WeightedStats direction_stats(const std::string& id) const;
  WeightedStats strategy_stats(const std::string& id) const;
  /// Evidence of `to` attempted `lag` (1..kMaxLag) steps after `from` was chosen.
  WeightedStats edge_stats(const std::string& from, const std::string& to, int lag) const;

  /// Every evidence row of the backend with its weight, oldest first.
  const std::vector<std::pair<Evidence, double>>& weighted_evidence() const { return evidence_; }

 private:
  std::vector<Direction> directions_;
  std::vector<Strategy> strategies_;
  std::map<std::pair<std::string, std::string>, Edge> edges_;
  std::map<std::string, WeightedStats> direction_stats_;
  std::map<std::string, WeightedStats> strategy_stats_;
  std::map<std::pair<std::pair<std::string, std::string>, int>, WeightedStats> edge_stats_;
  std::vector<std::pair<Evidence, double>> evidence_;
};

}  // namespace kforge::memory

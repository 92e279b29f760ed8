// The scheduler's promotion rule: which rung-1 candidates earn rung 2 (every timed workload,
// more repetitions), by successive halving over a score S(p, r).
//
// Successive halving (Jamieson & Talwalkar, "Non-stochastic Best Arm Identification and
// Hyperparameter Optimization", AISTATS 2016; the inner loop of Hyperband, Li et al., "Hyperband:
// A Novel Bandit-Based Approach to Hyperparameter Optimization", JMLR 18(185), 2018): of n
// configurations evaluated at one budget, the top ceil(n / eta) by their score go on to a budget
// eta times larger, the rest stop. KernelBrain applies the same idea to kernels with a score
// S(p, r) of candidate p at rung r that ranks "with stability in mind"; kforge's S at rung 1 is
// a lower confidence bound of the quick-rung speedup:
//
//   S(p, 1) = reference_ms / t_hi(p)
//
// where t_hi(p) is the upper end of the
// distribution-free confidence interval of p's median quick-rung time: the order statistic
// x_(u) of its n sorted samples, u the smallest rank with P(Binomial(n, 1/2) <= u - 1) >=
// (1 + level) / 2 (the order-statistic interval of a quantile, Conover, "Practical
// Nonparametric Statistics", 3rd ed., 1999, ch. 3). A candidate that is fast but noisy (few
// samples, wide spread) scores below one that is as fast and steady, so noise alone does not
// earn the expensive rung. With 8 samples or fewer u = n (the slowest sample) at level 0.95.
// reference_ms is the reference timed in p's own rung-1 window (short rounds interleaved with
// p's quick rounds: evaluation::QuickReference), at the lower end of its median's interval,
// x_(n + 1 - u) of its samples: 16 samples by default, whose own noise must
// not pass for a speedup (with the window's median instead, identical code scored up to 1.81
// under load, bench/ladder/identical_cpu.md). Before, it was the reference's median timed once
// at the start of the run, and a load that came or went since moved every S by up to 4x: on a
// loaded 2-core machine the reference itself scored 2.17x over itself (issue 21). Runs
// recorded before the window have only that median, and their S is as it was.
//
// Per step (a "cohort" = the correct candidates that finished rung 1 since the last promotion):
//   ladder  the top ceil(n / eta) by S(p, 1) are promoted (ties: the earlier candidate first),
//           and the current best (accepted through the paired comparison, stronger evidence than
//           S) is promoted too when it is in the cohort. A candidate below the quota whose
//           optimistic score (reference_ms over the *lower* end of its median's interval) is
//           above the cut (the lowest S promoted by rank) is within noise of the cut, and is
//           promoted too (at most another quota of them, best optimistic first): on a loaded
//           machine the cut otherwise dropped the true best about one run in ten
//           (bench/search/README.md), and on a quiet device the intervals are narrow and
//           nearly nothing is added. When the task has several timed
//           workloads, the best-scoring candidate of each decomposition that has not had a
//           candidate on rung 2 yet is promoted as well (decomposition coverage): rung 1 times
//           the primary workload only, and a change of parallel decomposition is what changes
//           how a kernel ranks across shapes (on the H200, LayerNorm's split_row is 37x the
//           reference at 16 x 4M and 0.03x at 8192 x 4096; bench/ladder/ladder_cuda.md). The rest
//           are pruned.
//   full    every correct candidate is promoted (the flat full-fidelity baseline).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace kforge::search {

/// How candidates are evaluated: `ladder` = quick rung for all, rung 2 for the promoted;
/// `full` = the full measurement policy at rung 1 and rung 2 for every correct candidate.
enum class Fidelity { ladder, full };
/// "ladder" / "full".
std::string to_string(Fidelity fidelity);
/// Parses "ladder" or "full"; throws Error naming --fidelity otherwise.
Fidelity parse_fidelity(const std::string& text);

/// Throws Error naming --eta unless eta is finite and > 1 (eta <= 1 would promote everyone and
/// prune no one: that is --fidelity full, asked for by its name).
void validate_eta(double eta);

/// S(p, 1) above: reference_ms over the upper confidence bound (at `level`, two-sided) of the
/// median of `samples_ms` (milliseconds, any order). 0 when there are no samples or a sample is
/// not positive.
double quick_score(std::span<const double> samples_ms, double reference_ms, double level = 0.95);

/// reference_ms over the lower confidence bound of the median of `samples_ms` (the order
/// statistic x_(n + 1 - u), u = median_upper_rank): the upper end of the quick speedup's
/// interval, >= quick_score(). 0 as quick_score() is.
double quick_score_upper(std::span<const double> samples_ms, double reference_ms,
                         double level = 0.95);

/// S(p, 1) over a reference timed in p's own window: the lower confidence bound of the median
/// of `reference_samples_ms` over the upper bound of the median of `samples_ms` (both the
/// order-statistic interval above, at `level`). 0 when either is empty or has a sample <= 0.
double quick_score(std::span<const double> samples_ms,
                   std::span<const double> reference_samples_ms, double level = 0.95);
/// Its upper end: the reference's upper bound over p's lower bound; >= quick_score(). 0 as
/// quick_score() is.
double quick_score_upper(std::span<const double> samples_ms,
                         std::span<const double> reference_samples_ms, double level = 0.95);

/// The 1-based rank u of the order statistic x_(u) that bounds the median from above at `level`
/// (two-sided) for n samples; n when n is too small for the level.
int median_upper_rank(int n, double level);

/// One rung-1 candidate competing for rung 2.
struct Contender {
  std::string id;
  double score = 0.0;   // S(p, 1)
  bool is_best = false; // the current best of the search
  /// Its parallel decomposition (the template variant); empty when unknown (LLM candidates).
  std::string decomposition;
  /// True when a candidate of the same decomposition already reached rung 2 in an earlier step.
  bool decomposition_covered = false;
  double optimistic = 0.0;  // quick_score_upper(); 0 = unknown (no second chance at the cut)
};

/// The decision for one contender, in the cohort's order.
struct Promotion {
  std::string id;
  bool promoted = false;
  int rank = 0;         // 1-based rank by score within the cohort
  int quota = 0;        // ceil(n / eta) (n under full fidelity)
  std::string reason;   // in words, for --explain and the run journal
};

/// Applies the rule above to one cohort. Deterministic: the same contenders in the same order
/// give the same decisions. `eta` must pass validate_eta (ignored under full fidelity).
/// `cover_decompositions`: apply decomposition coverage (set when the task has two or more timed
/// workloads).
std::vector<Promotion> successive_halving(std::span<const Contender> cohort, double eta,
                                          Fidelity fidelity, bool cover_decompositions = false);

}  // namespace kforge::search

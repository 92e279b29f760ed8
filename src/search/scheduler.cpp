#include "search/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "common/error.h"

namespace kforge::search {

std::string to_string(Fidelity fidelity) {
  return fidelity == Fidelity::full ? "full" : "ladder";
}

Fidelity parse_fidelity(const std::string& text) {
  if (text == "ladder") return Fidelity::ladder;
  if (text == "full") return Fidelity::full;
  throw Error("--fidelity: '" + text + "' is not a fidelity (expected ladder or full)");
}

void validate_eta(double eta) {
  if (!std::isfinite(eta) || eta <= 1.0) {
    throw Error(fmt::format("--eta: {} is not a halving ratio (expected a number > 1, e.g. 3: the "
                            "top third of each step's candidates reach rung 2; to give every "
                            "candidate rung 2 use --fidelity full)",
                            eta));
  }
}

int median_upper_rank(int n, double level) {
  if (n <= 0) return 0;
  // P(Binomial(n, 1/2) <= k), accumulated in doubles: n stays in the hundreds at most.
  const double target = (1.0 + level) / 2.0;
  double cdf = 0.0;
  double term = std::pow(0.5, n);  // P(X = 0)
  for (int k = 0; k < n; ++k) {
    cdf += term;
    if (cdf >= target) return std::min(n, k + 1);
    term *= static_cast<double>(n - k) / static_cast<double>(k + 1);
  }
  return n;
}

namespace {

// The bound of the median of `samples_ms` at `level`: x_(u) (upper) or x_(n + 1 - u) (lower),
// u = median_upper_rank; 0 when there are no samples or one is not positive.
double median_bound(std::span<const double> samples_ms, double level, bool upper) {
  if (samples_ms.empty()) return 0.0;
  std::vector<double> sorted(samples_ms.begin(), samples_ms.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() <= 0.0) return 0.0;
  const int n = static_cast<int>(sorted.size());
  const int u = median_upper_rank(n, level);
  return sorted[static_cast<size_t>(upper ? u - 1 : n - u)];
}

double ratio_or_zero(double numerator, double denominator) {
  return numerator > 0.0 && denominator > 0.0 ? numerator / denominator : 0.0;
}

}  // namespace

double quick_score(std::span<const double> samples_ms, double reference_ms, double level) {
  return ratio_or_zero(reference_ms, median_bound(samples_ms, level, true));
}

double quick_score_upper(std::span<const double> samples_ms, double reference_ms, double level) {
  return ratio_or_zero(reference_ms, median_bound(samples_ms, level, false));
}

double quick_score(std::span<const double> samples_ms,
                   std::span<const double> reference_samples_ms, double level) {
  return ratio_or_zero(median_bound(reference_samples_ms, level, false),
                       median_bound(samples_ms, level, true));
}

double quick_score_upper(std::span<const double> samples_ms,
                         std::span<const double> reference_samples_ms, double level) {
  return ratio_or_zero(median_bound(reference_samples_ms, level, true),
                       median_bound(samples_ms, level, false));
}

std::vector<Promotion> successive_halving(std::span<const Contender> cohort, double eta,
                                          Fidelity fidelity, bool cover_decompositions) {
  const int n = static_cast<int>(cohort.size());
  std::vector<int> order(cohort.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return cohort[a].score > cohort[b].score; });
  const int quota =
      fidelity == Fidelity::full ? n : static_cast<int>(std::ceil(static_cast<double>(n) / eta));
  std::vector<Promotion> decisions(cohort.size());
  std::set<std::string> covered;  // decompositions with a candidate on rung 2
  for (const Contender& c : cohort) {
    if (c.decomposition_covered) covered.insert(c.decomposition);
  }
  // Within noise of the cut: below the quota, but with an optimistic score above the lowest S
  // promoted by rank; at most `quota` of them, the highest optimistic scores first.
  std::set<int> near_cut;
  const double cut =
      quota > 0 ? cohort[static_cast<size_t>(order[static_cast<size_t>(quota - 1)])].score : 0.0;
  if (fidelity == Fidelity::ladder && quota < n) {
    std::vector<int> near;
    for (int rank = quota + 1; rank <= n; ++rank) {
      const int i = order[static_cast<size_t>(rank - 1)];
      if (cohort[static_cast<size_t>(i)].optimistic > cut) near.push_back(i);
    }
    std::stable_sort(near.begin(), near.end(), [&](int a, int b) {
      return cohort[static_cast<size_t>(a)].optimistic > cohort[static_cast<size_t>(b)].optimistic;
    });
    if (static_cast<int>(near.size()) > quota) near.resize(static_cast<size_t>(quota));
    near_cut.insert(near.begin(), near.end());
  }
  for (int rank = 1; rank <= n; ++rank) {
    const int i = order[static_cast<size_t>(rank - 1)];
    const Contender& c = cohort[static_cast<size_t>(i)];
    Promotion& p = decisions[static_cast<size_t>(i)];
    p.id = c.id;
    p.rank = rank;
    p.quota = quota;
    if (fidelity == Fidelity::full) {
      p.promoted = true;
      p.reason = "fidelity full: every correct candidate gets rung 2";
    } else if (rank <= quota) {
      p.promoted = true;
      p.reason = fmt::format("S = {:.3f}x (lower bound of the quick speedup) ranks {} of {}, "
                             "within the top ceil({}/{:g}) = {}",
                             c.score, rank, n, n, eta, quota);
    } else if (c.is_best) {
      p.promoted = true;
      p.reason = fmt::format("the search's best (accepted by a paired comparison), although "
                             "S = {:.3f}x ranks {} of {}, outside the top {}",
                             c.score, rank, n, quota);
    } else if (near_cut.contains(i)) {
      p.promoted = true;
      p.reason = fmt::format("within noise of the cut: S = {:.3f}x ranks {} of {}, outside the "
                             "top {}, but its quick speedup may be as high as {:.3f}x, above the "
                             "cut S = {:.3f}x",
                             c.score, rank, n, quota, c.optimistic, cut);
    } else if (cover_decompositions && !c.decomposition.empty() &&
               !covered.contains(c.decomposition)) {
      p.promoted = true;
      p.reason = fmt::format("the first {} candidate to reach rung 2 (decomposition coverage: "
                             "rung 1 timed only the primary workload), although S = {:.3f}x "
                             "ranks {} of {}, outside the top {}",
                             c.decomposition, c.score, rank, n, quota);
    } else {
      p.reason = fmt::format("S = {:.3f}x (lower bound of the quick speedup) ranks {} of {}, "
                             "outside the top ceil({}/{:g}) = {}",
                             c.score, rank, n, n, eta, quota);
    }
    if (p.promoted && !c.decomposition.empty()) covered.insert(c.decomposition);
  }
  return decisions;
}

}  // namespace kforge::search

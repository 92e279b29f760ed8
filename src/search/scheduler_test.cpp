#include "search/scheduler.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "common/error.h"

namespace kforge::search {
namespace {

TEST(Scheduler, MedianUpperRankFollowsTheBinomialOrderStatistic) {
  // n = 10 at 95%: P(X <= 7) = 0.945 < 0.975 <= P(X <= 8) = 0.989, so x_(9) bounds the median.
  EXPECT_EQ(median_upper_rank(10, 0.95), 9);
  EXPECT_EQ(median_upper_rank(40, 0.95), 27);  // 20 + 1.96 * sqrt(10) ~ 26.2, exact: 27
  EXPECT_EQ(median_upper_rank(5, 0.95), 5);    // too few samples: the slowest one
  EXPECT_EQ(median_upper_rank(0, 0.95), 0);
}

TEST(Scheduler, QuickScoreIsALowerBoundOfTheSpeedupAndPenalizesNoise) {
  const std::vector<double> steady = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  const std::vector<double> noisy = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 1.5, 1.6, 1.7, 1.8};
  EXPECT_DOUBLE_EQ(quick_score(steady, 2.0), 2.0);
  // Its median (0.9 and 1.5 -> 1.2) is near, but its upper bound x_(9) = 1.7 is far.
  EXPECT_NEAR(quick_score(noisy, 2.0), 2.0 / 1.7, 1e-12);
  EXPECT_LT(quick_score(noisy, 2.0), quick_score(steady, 2.0));
  EXPECT_EQ(quick_score({}, 2.0), 0.0);
  EXPECT_EQ(quick_score(std::vector<double>{0.0, 1.0}, 2.0), 0.0);
}

TEST(Scheduler, SuccessiveHalvingPromotesTheTopThirdAndPrunesTheRest) {
  const std::vector<Contender> cohort = {
      {"a", 1.5, false}, {"b", 3.0, false}, {"c", 2.0, false}, {"d", 0.5, false},
      {"e", 2.5, false}, {"f", 1.0, false}, {"g", 2.9, false}};
  const std::vector<Promotion> decisions = successive_halving(cohort, 3.0, Fidelity::ladder);
  ASSERT_EQ(decisions.size(), cohort.size());
  std::vector<std::string> promoted;
  for (const Promotion& p : decisions) {
    EXPECT_EQ(p.quota, 3);  // ceil(7 / 3)
    if (p.promoted) promoted.push_back(p.id);
  }
  EXPECT_EQ(promoted, (std::vector<std::string>{"b", "e", "g"}));  // in the cohort's order
  EXPECT_EQ(decisions[1].rank, 1);
  EXPECT_NE(decisions[3].reason.find("outside the top ceil(7/3) = 3"), std::string::npos);
}

TEST(Scheduler, OneCandidateIsAlwaysPromotedAndTiesGoToTheEarlierOne) {
  std::vector<Contender> one = {{"only", 0.1, false}};
  EXPECT_TRUE(successive_halving(one, 3.0, Fidelity::ladder)[0].promoted);
  std::vector<Contender> tied = {{"x", 2.0, false}, {"y", 2.0, false}, {"z", 2.0, false}};
  const std::vector<Promotion> decisions = successive_halving(tied, 3.0, Fidelity::ladder);
  EXPECT_TRUE(decisions[0].promoted);
  EXPECT_FALSE(decisions[1].promoted);
  EXPECT_FALSE(decisions[2].promoted);
}

TEST(Scheduler, TheBestIsPromotedEvenOutsideTheQuota) {
  std::vector<Contender> cohort = {{"fast_noisy", 3.0, false}, {"best", 2.0, true},
                                   {"slow", 1.0, false}};
  const std::vector<Promotion> decisions = successive_halving(cohort, 3.0, Fidelity::ladder);
  EXPECT_TRUE(decisions[0].promoted);
  EXPECT_TRUE(decisions[1].promoted);
  EXPECT_NE(decisions[1].reason.find("the search's best"), std::string::npos);
  EXPECT_FALSE(decisions[2].promoted);
}

TEST(Scheduler, DecompositionCoverageSendsEachNewDecompositionsBestToRungTwo) {
  // Six candidates, quota ceil(6/3) = 2: both split_row ones fill it. block_per_row has not been
  // on rung 2, so its best (rank 4) goes too; its other candidate and the covered warp_per_row
  // decomposition do not.
  std::vector<Contender> cohort = {
      {"split_a", 37.0, true, "split_row", false},  {"split_b", 36.0, false, "split_row", false},
      {"block_a", 3.0, false, "block_per_row", false}, {"block_b", 3.5, false, "block_per_row", false},
      {"warp_a", 4.0, false, "warp_per_row", true},   {"llm", 5.0, false, "", false}};
  const std::vector<Promotion> covered =
      successive_halving(cohort, 3.0, Fidelity::ladder, /*cover_decompositions=*/true);
  EXPECT_TRUE(covered[0].promoted);
  EXPECT_TRUE(covered[1].promoted);
  EXPECT_FALSE(covered[2].promoted);
  EXPECT_TRUE(covered[3].promoted);
  EXPECT_NE(covered[3].reason.find("the first block_per_row candidate to reach rung 2"),
            std::string::npos) << covered[3].reason;
  EXPECT_FALSE(covered[4].promoted);  // warp_per_row was on rung 2 in an earlier step
  EXPECT_FALSE(covered[5].promoted);  // no decomposition known: the plain rule
  // Without coverage (one timed workload) only the quota is promoted.
  const std::vector<Promotion> plain = successive_halving(cohort, 3.0, Fidelity::ladder);
  EXPECT_FALSE(plain[3].promoted);
}

TEST(Scheduler, FullFidelityPromotesEveryone) {
  std::vector<Contender> cohort = {{"a", 1.0, false}, {"b", 0.1, false}, {"c", 5.0, false}};
  for (const Promotion& p : successive_halving(cohort, 3.0, Fidelity::full)) {
    EXPECT_TRUE(p.promoted) << p.id;
    EXPECT_EQ(p.quota, 3);
  }
}

TEST(Scheduler, BadEtaAndFidelityAreRefusedNamingTheFlag) {
  for (double eta : {1.0, 0.5, 0.0, -3.0, std::nan("")}) {
    try {
      validate_eta(eta);
      ADD_FAILURE() << "accepted eta " << eta;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--eta"), std::string::npos);
    }
  }
  EXPECT_NO_THROW(validate_eta(1.5));
  EXPECT_NO_THROW(validate_eta(3.0));
  EXPECT_EQ(parse_fidelity("full"), Fidelity::full);
  EXPECT_EQ(to_string(parse_fidelity("ladder")), "ladder");
  EXPECT_THROW(parse_fidelity("flat"), Error);
}

}  // namespace
}  // namespace kforge::search

namespace kforge::search {
namespace {

TEST(Scheduler, QuickScoreUpperIsTheOptimisticEndOfTheSameInterval) {
  const std::vector<double> samples = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9};
  // n = 10 at level 0.95: u = 9, so the interval of the median is [x_(2), x_(9)].
  EXPECT_DOUBLE_EQ(quick_score(samples, 10.0), 10.0 / 1.8);
  EXPECT_DOUBLE_EQ(quick_score_upper(samples, 10.0), 10.0 / 1.1);
  EXPECT_EQ(quick_score_upper({}, 10.0), 0.0);
  EXPECT_EQ(quick_score_upper(samples, 0.0), 0.0);
}

TEST(Scheduler, QuickScoreOverAWindowsReferenceTakesItsNoiseToo) {
  // The reference's 10 window samples: interval [x_(2), x_(9)] = [2.1, 2.8]; the candidate's
  // [1.1, 1.8] as above.
  const std::vector<double> samples = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9};
  const std::vector<double> reference = {2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9};
  EXPECT_DOUBLE_EQ(quick_score(samples, reference), 2.1 / 1.8);
  EXPECT_DOUBLE_EQ(quick_score_upper(samples, reference), 2.8 / 1.1);
  // Below the score over the reference's median alone: its noise is not a speedup.
  EXPECT_LT(quick_score(samples, reference), quick_score(samples, 2.45));
  // Identical samples on both sides: at most 1 (x_(2) over x_(9)).
  EXPECT_LE(quick_score(samples, samples), 1.0);
  EXPECT_EQ(quick_score(samples, std::vector<double>{}), 0.0);
  EXPECT_EQ(quick_score_upper(std::vector<double>{}, reference), 0.0);
}

TEST(Scheduler, ACandidateWithinNoiseOfTheCutGetsRungTwoAtMostAQuotaMore) {
  // Six contenders, quota ceil(6/3) = 2: the cut is b's S = 4. c and d are noisy enough that
  // their optimistic ends reach past it; e's does not; f's reaches it exactly (not above).
  std::vector<Contender> cohort;
  for (const auto& [id, score, optimistic] :
       std::vector<std::tuple<std::string, double, double>>{{"a", 5.0, 6.0}, {"b", 4.0, 4.5},
                                                            {"c", 3.0, 4.8}, {"d", 2.0, 4.2},
                                                            {"e", 1.0, 3.9}, {"f", 0.5, 4.0}}) {
    Contender c;
    c.id = id;
    c.score = score;
    c.optimistic = optimistic;
    cohort.push_back(c);
  }
  std::vector<Promotion> p = successive_halving(cohort, 3.0, Fidelity::ladder);
  EXPECT_TRUE(p[0].promoted && p[1].promoted);
  EXPECT_TRUE(p[2].promoted);
  EXPECT_NE(p[2].reason.find("within noise of the cut"), std::string::npos) << p[2].reason;
  EXPECT_TRUE(p[3].promoted);
  EXPECT_FALSE(p[4].promoted);
  EXPECT_FALSE(p[5].promoted);
  // Three near the cut, room for two: the two most optimistic go.
  cohort[4].optimistic = 5.5;
  p = successive_halving(cohort, 3.0, Fidelity::ladder);
  EXPECT_TRUE(p[4].promoted);   // 5.5
  EXPECT_TRUE(p[2].promoted);   // 4.8
  EXPECT_FALSE(p[3].promoted);  // 4.2: the cap
  // Without an optimistic score (0: unknown), nothing changes from plain successive halving.
  for (Contender& c : cohort) c.optimistic = 0.0;
  p = successive_halving(cohort, 3.0, Fidelity::ladder);
  EXPECT_EQ(std::count_if(p.begin(), p.end(), [](const Promotion& x) { return x.promoted; }), 2);
}

}  // namespace
}  // namespace kforge::search

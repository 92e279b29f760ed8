#include "search/scheduler.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

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

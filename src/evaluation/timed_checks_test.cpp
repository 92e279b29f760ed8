#include "evaluation/timed_checks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace kforge::evaluation {
namespace {

GateCase overwrite_case() {
  GateCase gate_case;
  gate_case.seed = 1234;
  gate_case.distribution = "normal";
  return gate_case;
}

worker::MeasurementPolicy with_min(int min_repetitions) {
  worker::MeasurementPolicy measurement;
  measurement.min_repetitions = min_repetitions;
  measurement.max_repetitions = 40;
  return measurement;
}

TEST(TimedChecksPlan, DrawsDistinctCallsThatRunWithBothKinds) {
  for (uint64_t request = 0; request < 200; ++request) {
    const auto checks = plan_timed_checks(99, request, overwrite_case(), with_min(10), 2);
    ASSERT_EQ(checks.size(), 2u);
    EXPECT_LT(checks[0].call, checks[1].call);  // distinct and sorted
    EXPECT_GE(checks[0].call, 0);
    EXPECT_LT(checks[1].call, 10);  // below min_repetitions: it always runs
    EXPECT_FALSE(checks[0].overwrite);  // own values first, then the overwritten set
    EXPECT_TRUE(checks[1].overwrite);
    EXPECT_EQ(checks[1].seed, 1234u);
    EXPECT_EQ(checks[1].distribution, "normal");
  }
}

TEST(TimedChecksPlan, CoversEveryCallAndDependsOnTheSecret) {
  std::map<int, int> hits;
  int overwrites = 0;
  for (uint64_t request = 0; request < 2000; ++request) {
    const auto checks = plan_timed_checks(7, request, overwrite_case(), with_min(10), 1);
    ASSERT_EQ(checks.size(), 1u);
    ++hits[checks[0].call];
    overwrites += checks[0].overwrite;
  }
  ASSERT_EQ(hits.size(), 10u);  // every call of [0, 10) is checked sometimes
  for (const auto& [call, count] : hits) EXPECT_GT(count, 120) << call;  // ~200 each
  EXPECT_GT(overwrites, 850);  // a single check's kind is drawn: ~1000 of 2000
  EXPECT_LT(overwrites, 1150);
  int same = 0;
  for (uint64_t request = 0; request < 100; ++request) {
    same += plan_timed_checks(1, request, overwrite_case(), with_min(10), 2)[0].call ==
            plan_timed_checks(2, request, overwrite_case(), with_min(10), 2)[0].call;
  }
  EXPECT_LT(same, 40);  // another secret, other calls (chance: about 1 in 5)
}

TEST(TimedChecksPlan, NeverMoreChecksThanGuaranteedCalls) {
  EXPECT_EQ(plan_timed_checks(3, 0, overwrite_case(), with_min(1), 2).size(), 1u);
  EXPECT_TRUE(plan_timed_checks(3, 0, overwrite_case(), with_min(10), 0).empty());
  const auto all = plan_timed_checks(3, 0, overwrite_case(), with_min(3), 5);
  ASSERT_EQ(all.size(), 3u);
  std::set<int> calls;
  for (const auto& check : all) calls.insert(check.call);
  EXPECT_EQ(calls, (std::set<int>{0, 1, 2}));
}

}  // namespace
}  // namespace kforge::evaluation

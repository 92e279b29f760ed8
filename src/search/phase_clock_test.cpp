#include "search/phase_clock.h"

#include <gtest/gtest.h>

namespace kforge::search {
namespace {

TEST(PhaseClock, NestedPhasesAreDisjointAndSumToTheWallTime) {
  double now = 100.0;
  PhaseClock clock([&] { return now; }, "search");
  {
    auto before = clock.enter("prepare");  // before start(): nothing counts
    now += 5.0;
  }
  clock.start();
  now += 1.0;  // search
  {
    auto prepare = clock.enter("prepare");
    now += 2.0;
    {
      auto wait = clock.enter("compile_wait");
      now += 3.0;
    }
    now += 0.5;  // prepare again
  }
  now += 4.0;  // search
  auto final_phase = clock.enter("final");
  now += 0.25;
  const auto seconds = clock.seconds();  // the running phase counted so far
  EXPECT_DOUBLE_EQ(seconds.at("search"), 5.0);
  EXPECT_DOUBLE_EQ(seconds.at("prepare"), 2.5);
  EXPECT_DOUBLE_EQ(seconds.at("compile_wait"), 3.0);
  EXPECT_DOUBLE_EQ(seconds.at("final"), 0.25);
  double sum = 0.0;
  for (const auto& [phase, s] : seconds) sum += s;
  EXPECT_DOUBLE_EQ(sum, 10.75);
  EXPECT_EQ(seconds.size(), 4u);
}

}  // namespace
}  // namespace kforge::search

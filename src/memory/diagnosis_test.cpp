#include "memory/diagnosis.h"

#include <gtest/gtest.h>

namespace kforge::memory {
namespace {

TEST(Diagnose, DerivesBandwidthFractionAndRooflinePosition) {
  // 1 GB in 1 ms = 1 TB/s over a 2 TB/s copy rate; 0.25 FLOP/byte below the ridge 60e12 / 2e12.
  Diagnosis d = diagnose("ok", 0.05, 1.0, 1e9, 2.5e8, 2e12, 60e12);
  EXPECT_NEAR(*d.bandwidth_fraction, 0.5, 1e-12);
  EXPECT_TRUE(*d.memory_bound);
  EXPECT_EQ(d.summary(), "verdict=ok gain=+0.050 bandwidth=0.50 memory_bound=yes");
  Diagnosis failed =
      diagnose("compile_error", std::nullopt, std::nullopt, 1e9, std::nullopt, 2e12, 0.0);
  EXPECT_TRUE(failed.compile_failed());
  EXPECT_FALSE(failed.bandwidth_fraction.has_value());
  EXPECT_FALSE(failed.memory_bound.has_value());
  EXPECT_EQ(failed.summary(), "verdict=compile_error");
  EXPECT_EQ(Diagnosis{}.summary(), "");
}

TEST(MatchTrigger, JudgesBandwidthThresholdsBoundednessAndVerdicts) {
  Diagnosis d;
  d.verdict = "ok";
  d.bandwidth_fraction = 0.5;
  d.memory_bound = true;
  const char* below60 = "achieved bandwidth below 60% of copy bandwidth";
  EXPECT_EQ(match_trigger(below60, d), TriggerMatch::matches);
  d.bandwidth_fraction = 0.7;
  EXPECT_EQ(match_trigger(below60, d), TriggerMatch::contradicts);
  EXPECT_EQ(match_trigger(below60, Diagnosis{}), TriggerMatch::unknown);
  EXPECT_EQ(match_trigger("Memory-bound kernel doing 4-byte loads", d), TriggerMatch::matches);
  EXPECT_EQ(match_trigger("arithmetic intensity above the ridge point", d),
            TriggerMatch::contradicts);
  EXPECT_EQ(match_trigger("rows of at most about 32 elements", d), TriggerMatch::unknown);
  EXPECT_EQ(match_trigger("compiler report shows the hot loop not vectorized", d),
            TriggerMatch::unknown);
  EXPECT_EQ(match_trigger("previous attempt failed with a compile error", d),
            TriggerMatch::contradicts);
  d.verdict = "compile_error";
  EXPECT_EQ(match_trigger("previous attempt failed with a compile error", d),
            TriggerMatch::matches);
  d.verdict = "wrong_answer";
  EXPECT_EQ(match_trigger("results drift beyond the tolerance", d), TriggerMatch::matches);
}

TEST(Triggered, AnyMatchingTriggerSuffices) {
  Strategy s;
  s.triggers = {"rows of at most about 32 elements", "memory-bound kernel"};
  Diagnosis d;
  d.memory_bound = true;
  EXPECT_TRUE(triggered(s, d));
  d.memory_bound = false;
  EXPECT_FALSE(triggered(s, d));
}

}  // namespace
}  // namespace kforge::memory

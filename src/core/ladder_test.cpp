#include "core/ladder.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge {
namespace {

// The strings are the run database's, events.jsonl's and result.json's: runs written before the
// enums existed must read back, so they are spelled out here rather than derived.
TEST(LadderTest, RungsKeepTheirNamesAndNumbers) {
  const std::pair<Rung, const char*> expected[] = {
      {Rung::gate, "gate"}, {Rung::quick, "quick"}, {Rung::full, "full"}, {Rung::final, "final"}};
  int number = 0;
  for (const auto& [rung, name] : expected) {
    EXPECT_EQ(to_string(rung), name);
    EXPECT_EQ(parse_rung(name), rung);
    EXPECT_EQ(rung_number(rung), number++);
  }
  EXPECT_EQ(number, kRungCount);
}

TEST(LadderTest, OutcomesKeepTheirRecordedNames) {
  for (const auto& [outcome, name] :
       {std::pair{ComparisonOutcome::faster, "faster"},
        std::pair{ComparisonOutcome::slower, "slower"}, std::pair{ComparisonOutcome::tie, "tie"},
        std::pair{ComparisonOutcome::failed, "failed"}}) {
    EXPECT_EQ(to_string(outcome), name);
    EXPECT_EQ(parse_comparison_outcome(name), outcome);
  }
  for (const auto& [outcome, name] : {std::pair{AcceptanceOutcome::accepted, "accepted"},
                                      std::pair{AcceptanceOutcome::not_better, "not_better"},
                                      std::pair{AcceptanceOutcome::rejected, "rejected"}}) {
    EXPECT_EQ(to_string(outcome), name);
    EXPECT_EQ(parse_acceptance_outcome(name), outcome);
  }
  for (const auto& [outcome, name] : {std::pair{PromotionOutcome::promoted, "promoted"},
                                      std::pair{PromotionOutcome::pruned, "pruned"}}) {
    EXPECT_EQ(to_string(outcome), name);
    EXPECT_EQ(parse_promotion_outcome(name), outcome);
  }
}

TEST(LadderTest, ParseNamesTheBadValueAndTheKnownOnes) {
  try {
    parse_rung("compare");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown rung 'compare' (expected one of: gate, quick, full, final)");
  }
  EXPECT_THROW(parse_comparison_outcome("better"), Error);
  EXPECT_THROW(parse_acceptance_outcome(""), Error);
  try {
    parse_promotion_outcome("Promoted");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown promotion outcome 'Promoted' (expected one of: promoted, pruned)");
  }
}

}  // namespace
}  // namespace kforge

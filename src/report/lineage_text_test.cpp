#include "report/lineage_text.h"

#include <gtest/gtest.h>

namespace kforge::report {
namespace {

TEST(LineageTextTest, OneLinePerCandidateAndTheMovesFromMemoryCounted) {
  const nlohmann::json lineage = nlohmann::json::parse(R"([
    {"index": 1, "id": "simd[A=1]", "strategy": "", "speedup": 1.9, "speedup_rung": "full",
     "support": null},
    {"index": 4, "id": "simd[A=2]", "direction": "data_reuse", "strategy": "more_acc",
     "speedup": 3.8, "speedup_rung": "full",
     "support": {"basis": "memory", "prior_transitions": 3, "prior_strategy": 1,
                 "prior_tasks": 2, "probability": 0.41}},
    {"index": 7, "id": "simd[A=2,P=1]", "direction": "parallelism", "strategy": "threads",
     "speedup": 7.5, "speedup_rung": "quick",
     "support": {"basis": "explored", "prior_against": 1, "probability": 0.2}}
  ])");
  const std::vector<std::string> lines = lineage_lines(lineage);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "#1 simd[A=1] (start), 1.90x full");
  EXPECT_EQ(lines[1], "-> #4 data_reuse / more_acc, 3.80x full: memory (3 prior transitions, "
                      "1 strategy row from 2 earlier tasks; p 0.41)");
  EXPECT_EQ(lines[2], "-> #7 parallelism / threads, 7.50x quick: explored (no evidence for it, "
                      "1 earlier row against; p 0.20)");
  EXPECT_EQ(lines[3], "1 of 2 moves chosen from earlier runs' evidence");
  EXPECT_TRUE(lineage_lines(nlohmann::json()).empty());
}

TEST(LineageTextTest, EveryBasisHasWords) {
  EXPECT_EQ(support_text(nlohmann::json()), "reason not recorded");
  EXPECT_EQ(support_text({{"basis", "no_memory"}}),
            "no memory read (the policy reads no evidence)");
  EXPECT_EQ(support_text({{"basis", "this_run"}, {"run_support", 2}, {"probability", 0.5}}),
            "this run's evidence (2 rows supporting; p 0.50)");
}

}  // namespace
}  // namespace kforge::report

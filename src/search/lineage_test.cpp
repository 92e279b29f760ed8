#include "search/lineage.h"

#include <gtest/gtest.h>

namespace kforge::search {
namespace {

LineageStep step(int index, std::string id, std::string parent) {
  LineageStep s;
  s.index = index;
  s.id = std::move(id);
  s.parent_id = std::move(parent);
  return s;
}

TEST(TraceLineageTest, FollowsParentsFromTheRootToTheBest) {
  const std::vector<LineageStep> records = {step(0, "a", ""), step(1, "b", ""),
                                            step(2, "a1", "a"), step(3, "b1", "b"),
                                            step(4, "a2", "a1")};
  const std::vector<LineageStep> chain = trace_lineage(records, "a2");
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].id, "a");
  EXPECT_EQ(chain[1].id, "a1");
  EXPECT_EQ(chain[2].id, "a2");
  EXPECT_EQ(trace_lineage(records, "b").size(), 1u);
  EXPECT_TRUE(trace_lineage(records, "missing").empty());
}

TEST(TraceLineageTest, AMissingParentOrACycleEndsTheChain) {
  EXPECT_EQ(trace_lineage(std::vector<LineageStep>{step(3, "r2", "gone")}, "r2").size(), 1u);
  const std::vector<LineageStep> cycle = {step(0, "x", "y"), step(1, "y", "x")};
  EXPECT_EQ(trace_lineage(cycle, "x").size(), 2u);
}

TEST(TraceLineageTest, JsonCarriesTheMoveAndItsSupport) {
  LineageStep s = step(4, "a2", "a1");
  s.direction_id = "parallelism";
  s.strategy_id = "more_rows";
  s.speedup = 2.5;
  s.speedup_rung = "full";
  s.support = memory::ChoiceSupport{};
  s.support->basis = "memory";
  const nlohmann::json j = s;
  EXPECT_EQ(j["strategy"], "more_rows");
  EXPECT_EQ(j["speedup_rung"], "full");
  EXPECT_EQ(j["support"]["basis"], "memory");
  EXPECT_TRUE(nlohmann::json(step(0, "a", ""))["support"].is_null());
}

}  // namespace
}  // namespace kforge::search

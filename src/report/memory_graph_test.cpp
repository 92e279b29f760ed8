#include "report/memory_graph.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "support/html_marks.h"

namespace kforge::report {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json step_event(int step, json after, std::vector<std::pair<std::string, std::string>> moves) {
  json chosen = json::array();
  for (const auto& [direction, strategy] : moves) {
    chosen.push_back({{"direction", direction}, {"strategy", strategy}});
  }
  return {{"event", "step"}, {"step", step}, {"after", std::move(after)}, {"moves", chosen}};
}

// A memory of four cpu directions (and one cuda one, left out) with edges among them.
json small_graph() {
  std::vector<memory::Direction> directions;
  for (const char* id : {"vectorize", "tile", "unroll", "parallel", "tensor_cores"}) {
    memory::Direction d;
    d.id = id;
    d.title = std::string("T ") + id;
    d.backends = {std::string(id) == "tensor_cores" ? "cuda" : "cpu"};
    directions.push_back(d);
  }
  std::vector<memory::Edge> edges;
  for (const auto& [from, to, prior] :
       {std::tuple{"vectorize", "tile", 0.1}, std::tuple{"tile", "unroll", 0.2},
        std::tuple{"unroll", "parallel", -0.1}, std::tuple{"vectorize", "tensor_cores", 0.3}}) {
    memory::Edge e;
    e.from_direction = from;
    e.to_direction = to;
    e.prior = prior;
    edges.push_back(e);
  }
  edges[0].by_lag[0].attempts = 4;
  edges[0].by_lag[0].mean_log_gain = 0.25;
  return memory_graph_json(directions, edges, "cpu");
}

// Steps 1-3: vectorize, then tile twice (step 2 replayed after a resume: counted once), then
// unroll; the memory never saw tile -> tile.
std::vector<json> run_events() {
  return {step_event(1, nullptr, {{"vectorize", "v16"}}),
          step_event(2, "vectorize", {{"tile", "t32"}, {"tile", "t64"}}),
          json{{"event", "candidate"}, {"index", 3}},
          step_event(2, "vectorize", {{"tile", "t32"}, {"tile", "t64"}}),
          step_event(3, "tile", {{"tile", "t128"}, {"unroll", "u4"}})};
}

TEST(MemoryGraph, TheSnapshotKeepsTheBackendsDirectionsAndTheEdgesBetweenThem) {
  const json graph = small_graph();
  EXPECT_EQ(graph.at("backend"), "cpu");
  EXPECT_EQ(graph.at("directions").size(), 4u) << graph.dump(2);
  EXPECT_EQ(graph.at("edges").size(), 3u) << "the edge to a cuda direction is left out";
  EXPECT_EQ(graph.at("edges").at(0).at("attempts"), 4);
}

TEST(MemoryGraph, StepEventsGiveTheMovesAndTheLagOneTransitions) {
  const RunTransitions run = run_transitions(run_events());
  EXPECT_TRUE(run.recorded);
  ASSERT_EQ(run.moves.size(), 5u);  // 1 + 2 (step 2 once) + 2
  EXPECT_EQ(run.moves[0].after, "");
  EXPECT_EQ(run.moves[4].after, "tile");
  EXPECT_EQ(run.chosen.at("tile"), (std::vector<std::string>{"s2 t32", "s2 t64", "s3 t128"}));
  ASSERT_EQ(run.used.size(), 3u);
  EXPECT_EQ(run.used.at({"vectorize", "tile"}), std::vector<std::string>{"s2"});
  EXPECT_EQ(run.used.at({"tile", "tile"}), std::vector<std::string>{"s3"});
  EXPECT_EQ(run.used.at({"tile", "unroll"}), std::vector<std::string>{"s3"});
  EXPECT_FALSE(run_transitions({json{{"event", "step"}, {"step", 1}}}).recorded);
}

TEST(MemoryGraph, TheDotHighlightsTheChosenDirectionsAndUsedEdgesOnly) {
  std::string cut;
  const std::string dot = memory_graph_dot(small_graph(), run_transitions(run_events()), 16, cut);
  EXPECT_EQ(cut, "");
  EXPECT_EQ(testing::count_of(dot, "class=\"chosen\""), 3u) << dot;  // vectorize, tile, unroll
  EXPECT_EQ(testing::count_of(dot, "class=\"used\""), 3u) << dot;
  EXPECT_NE(dot.find("\"vectorize\" -> \"tile\" [penwidth=6.00, label=\"u=+0.250 n=4\\nrun: s2\""),
            std::string::npos)
      << dot;
  // tile -> tile is no edge of the memory (yet): drawn, labelled new.
  EXPECT_NE(dot.find("\"tile\" -> \"tile\" [penwidth=3.00, label=\"new\\nrun: s3\""),
            std::string::npos)
      << dot;
  // unroll -> parallel was not used: its own (red, dashed) style.
  EXPECT_NE(dot.find("\"unroll\" -> \"parallel\" [penwidth=3.00, label=\"u=-0.100 n=0\", "
                     "style=dashed, color=red];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("run: s2 t32, s2 t64, s3 t128"), std::string::npos);
}

TEST(MemoryGraph, ALargeMemoryIsCutToTheRunsNeighbourhood) {
  json graph = small_graph();
  // 30 directions in a chain the run never came near but by a weak edge from unroll, and one
  // no edge reaches at all.
  for (int i = 0; i < 30; ++i) {
    const std::string id = "far" + std::to_string(i);
    graph["directions"].push_back({{"id", id}, {"title", "far"}});
    graph["edges"].push_back(
        {{"from", i == 0 ? "unroll" : "far" + std::to_string(i - 1)}, {"to", id}, {"prior", 0.01}});
  }
  graph["directions"].push_back({{"id", "lonely"}, {"title", "alone"}});
  std::string cut;
  const std::string dot = memory_graph_dot(graph, run_transitions(run_events()), 4, cut);
  // The run's three, and parallel: unroll's strongest neighbour (|-0.1| over far0's 0.01).
  EXPECT_EQ(cut,
            "4 of the memory's 34 connected directions are drawn: those this run chose and their "
            "strongest neighbours. Not drawn: 1 direction without any transition in the memory, "
            "not chosen by this run (lonely).");
  EXPECT_NE(dot.find("\"parallel\" [label="), std::string::npos) << dot;
  EXPECT_EQ(dot.find("far"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("lonely"), std::string::npos) << dot;
  EXPECT_EQ(testing::count_of(dot, "class=\"used\""), 3u);
}

class MemoryGraphSectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_memory_graph_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_graph() const { std::ofstream(dir_ / kMemoryGraphFile) << small_graph(); }

  fs::path dir_;
};

TEST_F(MemoryGraphSectionTest, TheGraphIsInlineSvgWithTheUsedEdgesAndATableOfMoves) {
  write_graph();
  const std::string section = memory_graph_section(dir_, run_events());
  // Laid out by graphviz (scripts/setup installs it).
  const size_t graph = section.find("<div class=\"memory-graph\"><svg");
  ASSERT_NE(graph, std::string::npos) << section;
  const std::string svg = section.substr(graph, section.find("</svg>", graph) - graph);
  EXPECT_EQ(testing::count_of(svg, "class=\"edge used\""), 3u) << svg;
  EXPECT_EQ(testing::count_of(svg, "class=\"edge\""), 1u) << svg;  // unroll -> parallel
  EXPECT_EQ(testing::count_of(svg, "class=\"node chosen\""), 3u) << svg;
  EXPECT_EQ(testing::count_of(section, "<tr><td>"), 5u) << section;  // one row per move
  EXPECT_NE(
      section.find("<td>2</td><td>vectorize</td><td>tile</td><td>t32</td><td>+0.250 (4)</td>"),
      std::string::npos)
      << section;
  EXPECT_NE(
      section.find("<td>tile</td><td>tile</td><td>t128</td><td>not in the memory&#39;s graph"),
      std::string::npos)
      << section;
}

TEST_F(MemoryGraphSectionTest, WithoutGraphvizThePageIsCompleteAndSaysWhy) {
  write_graph();
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (dir_ / "no-such-bin").c_str(), 1);
  const std::string section = memory_graph_section(dir_, run_events());
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(section.find("<svg"), std::string::npos) << section;
  EXPECT_NE(section.find("The graph is not drawn: graphviz"), std::string::npos) << section;
  EXPECT_EQ(testing::count_of(section, "<tr><td>"), 5u) << section;
}

TEST_F(MemoryGraphSectionTest, ARunWithoutTheGraphOrItsMovesSaysWhatIsMissing) {
  EXPECT_EQ(memory_graph_section(dir_, {}), "");  // nothing to show at all
  const std::string no_graph = memory_graph_section(dir_, run_events());
  EXPECT_NE(no_graph.find("has no readable memory_graph.json"), std::string::npos) << no_graph;
  EXPECT_EQ(testing::count_of(no_graph, "<tr><td>"), 5u);
  write_graph();
  const std::string no_moves = memory_graph_section(dir_, {json{{"event", "step"}, {"step", 1}}});
  EXPECT_NE(no_moves.find("name no move per step"), std::string::npos) << no_moves;
  EXPECT_NE(no_moves.find("<svg"), std::string::npos) << "the memory is still drawn";
}

}  // namespace
}  // namespace kforge::report

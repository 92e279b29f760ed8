// kforge's HTML pages of real runs, opened in a real browser (Debian's headless chromium,
// installed by scripts/setup): report.html of a run and suite.html of a suite. Each page loads
// with no console message, each chart has the marks the run's result.json (the suite's
// suite.json) says it should, and a screenshot is kept in $TMPDIR
// (kforge-report-screenshot.png, kforge-suite-report-screenshot.png). Without chromium they skip,
// saying why.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "process/subprocess.h"
#include "report/suite_metrics.h"
#include "support/chromium.h"
#include "support/cli_case.h"
#include "support/html_marks.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliReportBrowserTest : public testing::CliCase {
 protected:
  CliReportBrowserTest() : CliCase("kforge_cli_report_") {}

  // A copy of tests/data/softmax_small under tasks/<label>/, its references pointing at the
  // originals (a suite runs each task folder of a folder).
  void add_suite_task(const std::string& label) const {
    const fs::path from = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";
    const std::string text =
        std::regex_replace(read_file(from), std::regex(R"re(= "([^"]*\.(cpp|cu))")re"),
                           "= \"" + from.parent_path().string() + "/$1\"");
    fs::create_directories(dir_ / "tasks" / label);
    std::ofstream(dir_ / "tasks" / label / "task.toml") << text;
  }
};

TEST_F(CliReportBrowserTest, ARunsReportLoadsInChromiumWithEveryMark) {
  const std::string chromium = testing::find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium in $PATH (scripts/setup installs Debian's)";
  const fs::path task = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";
  const fs::path run = dir_ / "run";
  process::CommandResult optimize =
      kforge({"optimize", task.string(), "--backend", "cpu", "--steps", "2", "--proposals", "2",
              "--final-rounds", "2", "--run-dir", run.string()});
  ASSERT_EQ(optimize.exit_code, 0) << optimize.output;
  ASSERT_TRUE(fs::exists(run / "report.html"));
  const nlohmann::json result = nlohmann::json::parse(read_file(run / "result.json"));

  const testing::HeadlessChromium browser(chromium, dir_ / "profile");
  process::CommandResult loaded = browser.dump_dom(run / "report.html");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(loaded.output.find(":CONSOLE"), std::string::npos) << loaded.output;
  const std::string& dom = loaded.output;
  const size_t candidates = result.at("candidates").size();
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "by-candidate"), "class=\"mark "), candidates) << dom;
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "by-device-seconds"), "class=\"mark "), candidates);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "funnel"), "class=\"mark bar"), 4u);
  const size_t workloads = result.at("best").at("full_workload_speedups").size();
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "per-workload"), "class=\"mark bar"), workloads + 1);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "timings"), "class=\"mark bar"), 2u);
  // The reference and the best on the roofline (softmax_small counts its FLOPs).
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "roofline"), "class=\"mark reference\""), 1u);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "roofline"), "class=\"mark best\""), 1u);
  // Every raw sample of the final rounds is a mark.
  size_t samples = 0;
  for (const char* side : {"reference_rounds_ms", "best_rounds_ms"}) {
    for (const nlohmann::json& round : result.at("final").at(side)) samples += round.size();
  }
  EXPECT_GT(samples, 0u);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "final-samples"), "class=\"mark "), samples);
  EXPECT_NE(dom.find("finished: best "), std::string::npos);
  // The memory's graph: every direction the steps chose is highlighted, and so is each step-2
  // transition, from the direction chosen last at step 1 (candidates are made in move order).
  std::set<std::string> chosen, after_step_1;
  std::string last_of_step_1;
  for (const nlohmann::json& c : result.at("candidates")) {
    const int step = c.at("step").get<int>();
    if (step == 0) continue;
    chosen.insert(c.at("direction").get<std::string>());
    if (step == 1) last_of_step_1 = c.at("direction").get<std::string>();
    if (step == 2) after_step_1.insert(c.at("direction").get<std::string>());
  }
  ASSERT_FALSE(after_step_1.empty()) << "the run stopped before step 2";
  const size_t graph = dom.find("<div class=\"memory-graph\">");
  ASSERT_NE(graph, std::string::npos) << dom;
  const std::string svg = dom.substr(graph, dom.find("</svg>", graph) - graph);
  EXPECT_EQ(testing::count_of(svg, "class=\"node chosen\""), chosen.size()) << svg;
  EXPECT_EQ(testing::count_of(svg, "class=\"edge used\""), after_step_1.size())
      << "after " << last_of_step_1 << ": " << svg;

  const fs::path screenshot = fs::temp_directory_path() / "kforge-report-screenshot.png";
  process::CommandResult shot = browser.screenshot(run / "report.html", screenshot, 3000);
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  EXPECT_GT(fs::file_size(screenshot), 10000u) << "screenshot: " << screenshot;
  std::cerr << "report screenshot: " << screenshot << "\n";
}

// The suite's page (two optimize runs, about 110 s on a busy 2-core machine): labelled `slow`
// (Slow* fixtures, tests/CMakeLists.txt), run by scripts/test-slow; the run's page above stays
// in CI.
class SlowCliReportBrowserTest : public CliReportBrowserTest {};

TEST_F(SlowCliReportBrowserTest, ASuitesReportLoadsInChromiumWithEveryMark) {
  const std::string chromium = testing::find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium in $PATH (scripts/setup installs Debian's)";
  add_suite_task("softmax_a");
  add_suite_task("softmax_b");
  const fs::path suite = dir_ / "suite";
  process::CommandResult run =
      kforge({"suite", (dir_ / "tasks").string(), "--suite-dir", suite.string(), "--backend",
              "cpu", "--steps", "1", "--proposals", "1", "--final-rounds", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(fs::exists(suite / "suite.html"));
  const nlohmann::json json = nlohmann::json::parse(read_file(suite / "suite.json"));
  ASSERT_EQ(json.at("tasks").size(), 2u) << json.dump(2);

  const testing::HeadlessChromium browser(chromium, dir_ / "profile");
  process::CommandResult loaded = browser.dump_dom(suite / "suite.html");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(loaded.output.find(":CONSOLE"), std::string::npos) << loaded.output;
  const std::string& dom = loaded.output;
  // fast_p has one mark per threshold where it may change: the field's p (0, 1, 1.5, 2) and each
  // correct task's speedup; one bar (with its interval) per correct task.
  std::set<double> thresholds(std::begin(report::kFastPThresholds),
                              std::end(report::kFastPThresholds));
  size_t correct = 0;
  for (const nlohmann::json& row : json.at("tasks")) {
    if (!row.at("correct").get<bool>()) continue;
    ++correct;
    thresholds.insert(row.at("speedup").at("speedup").get<double>());
  }
  EXPECT_EQ(correct, 2u) << json.dump(2);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "fast-p"), "class=\"mark "), thresholds.size())
      << dom;
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "speedups"), "class=\"mark bar"), correct);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "speedups"), "class=\"whisker\""), correct);
  EXPECT_EQ(testing::count_of(dom, "<tr class=\"correct\">"), correct);
  for (const char* task : {"softmax_a", "softmax_b"}) {
    EXPECT_NE(dom.find(std::string("<a href=\"") + task + "/report.html\">"), std::string::npos);
  }

  const fs::path screenshot = fs::temp_directory_path() / "kforge-suite-report-screenshot.png";
  process::CommandResult shot = browser.screenshot(suite / "suite.html", screenshot, 1400);
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  EXPECT_GT(fs::file_size(screenshot), 10000u) << "screenshot: " << screenshot;
  std::cerr << "suite report screenshot: " << screenshot << "\n";
}

}  // namespace
}  // namespace kforge

// report.html of a real run, opened in a real browser (Debian's headless chromium, installed by
// scripts/setup): the page loads with no console message, each chart has the marks the run's
// result.json says it should, and a screenshot is kept ($TMPDIR/kforge-report-screenshot.png).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "process/subprocess.h"
#include "support/cli_case.h"
#include "support/html_marks.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// chromium (Debian) or chromium-browser, from $PATH; "" when neither is installed.
std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (const char* name : {"chromium", "chromium-browser"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = dirs.find(':', start);
      const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
      if (fs::exists(candidate)) return candidate.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

class CliReportBrowserTest : public testing::CliCase {
 protected:
  CliReportBrowserTest() : CliCase("kforge_cli_report_") {}
};

TEST_F(CliReportBrowserTest, ARunsReportLoadsInChromiumWithEveryMark) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium in $PATH (scripts/setup installs Debian's)";
  const fs::path task = fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml";
  const fs::path run = dir_ / "run";
  process::CommandResult optimize =
      kforge({"optimize", task.string(), "--backend", "cpu", "--steps", "1", "--proposals", "2",
              "--final-rounds", "2", "--run-dir", run.string()});
  ASSERT_EQ(optimize.exit_code, 0) << optimize.output;
  ASSERT_TRUE(fs::exists(run / "report.html"));
  const nlohmann::json result = nlohmann::json::parse(read_file(run / "result.json"));

  const std::vector<std::string> browser = {chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                            "--user-data-dir=" + (dir_ / "profile").string(),
                                            "--enable-logging=stderr", "--v=0"};
  std::vector<std::string> dump = browser;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + (run / "report.html").string());
  process::CommandResult loaded = process::run_command(dump, 120);
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
  // Every raw sample of the final rounds is a mark.
  size_t samples = 0;
  for (const char* side : {"reference_rounds_ms", "best_rounds_ms"}) {
    for (const nlohmann::json& round : result.at("final").at(side)) samples += round.size();
  }
  EXPECT_GT(samples, 0u);
  EXPECT_EQ(testing::count_of(testing::chart_of(dom, "final-samples"), "class=\"mark "), samples);
  EXPECT_NE(dom.find("finished: best "), std::string::npos);

  const fs::path screenshot = fs::temp_directory_path() / "kforge-report-screenshot.png";
  std::vector<std::string> shoot = browser;
  shoot.push_back("--window-size=1200,3000");
  shoot.push_back("--screenshot=" + screenshot.string());
  shoot.push_back("file://" + (run / "report.html").string());
  process::CommandResult shot = process::run_command(shoot, 120);
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  EXPECT_GT(fs::file_size(screenshot), 10000u) << "screenshot: " << screenshot;
  std::cerr << "report screenshot: " << screenshot << "\n";
}

}  // namespace
}  // namespace kforge

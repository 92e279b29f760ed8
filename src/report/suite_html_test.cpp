#include "report/suite_html.h"

#include <gtest/gtest.h>

#include "support/html_marks.h"

namespace kforge::report {
namespace {

SuiteRow correct(const std::string& name, double speedup) {
  SuiteRow row;
  row.name = name;
  row.completed = true;
  row.correct = true;
  row.speedup = speedup;
  row.speedup_ci_low = speedup - 0.1;
  row.speedup_ci_high = speedup + 0.1;
  return row;
}

TEST(SuiteHtml, FastPCurveSpeedupBarsAndEveryRow) {
  std::vector<SuiteRow> rows = {correct("softmax", 1.5), correct("a<b>", 2.5)};
  SuiteRow unserved;
  unserved.name = "cumsum";
  unserved.unserved = true;
  unserved.exit = "not run";
  unserved.failure = "no built-in kernel family computes what this module computes";
  unserved.reference_ms = 0.25;
  rows.push_back(unserved);
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) outcomes.push_back(row.outcome());
  const std::string page = render_suite_html(rows, compute_suite_metrics(outcomes), "/s");
  // p = 0, 1, 1.5, 2 and the two speedups (1.5 once): five thresholds.
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "fast-p"), "class=\"mark "), 5u);
  EXPECT_NE(testing::chart_of(page, "fast-p").find("fast_2 = 33.3% (1 of 3 tasks correct with speedup &gt; 2)"),
            std::string::npos)
      << testing::chart_of(page, "fast-p");
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "speedups"), "class=\"mark bar"), 2u);
  EXPECT_EQ(testing::count_of(testing::chart_of(page, "speedups"), "class=\"whisker\""), 2u);
  EXPECT_NE(page.find("<td>66.7% (2)</td>"), std::string::npos);
  EXPECT_NE(page.find("<tr class=\"unserved\"><td>cumsum</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>0.2500</td>"), std::string::npos);
  EXPECT_NE(page.find("a&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(page.find("a<b>"), std::string::npos);
  EXPECT_NE(page.find("<a href=\"softmax/report.html\">"), std::string::npos);
}

}  // namespace
}  // namespace kforge::report

// suite.html: a suite directory as one self-contained page (inline SVG, no script), rewritten
// with suite.json after every task: the KernelBench aggregate (correct, fast_p, geomean with its
// interval), fast_p as a curve over p, each task's speedup as a bar with its confidence interval,
// and every row with why a task has no correct candidate.
#pragma once

#include <string>
#include <vector>

#include "report/suite_metrics.h"
#include "report/suite_report.h"

namespace kforge::report {

/// The page of a suite's rows. Charts: "fast-p" (fast_p against p, one mark per distinct
/// threshold where it changes, over the correct tasks' speedups and the field's p = 0, 1, 1.5,
/// 2) and "speedups" (one bar per correct task, whiskers its interval, a rule at 1x).
std::string render_suite_html(const std::vector<SuiteRow>& rows, const SuiteMetrics& metrics,
                              const std::string& suite_dir);

}  // namespace kforge::report

#include "report/suite_report.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge::report {
namespace {

// The parts of result.json (OptimizeResult::to_json plus run_optimize's fields) a row reads.
nlohmann::json result_json(bool with_best) {
  nlohmann::json j = {{"task", "softmax"},
                      {"backend", "cpu"},
                      {"wall_s", 12.5},
                      {"candidates",
                       {{{"id", "a"}, {"verdict", "ok"}},
                        {{"id", "b"}, {"verdict", "wrong_answer"}},
                        {{"id", "c"}, {"verdict", "ok"}}}}};
  if (with_best) {
    j["best"] = {{"id", "c"}, {"verdict", "ok"}};
    j["final"] = {
        {"speedup", {{"speedup", 1.8}, {"ci_low", 1.7}, {"ci_high", 1.9}, {"level", 0.95}}}};
  } else {
    j["best"] = nullptr;
  }
  return j;
}

TEST(SuiteReport, ReadsACorrectRunFromItsResult) {
  SuiteRow row;
  nlohmann::json result = result_json(true);
  result["llm"] = {{"cost_usd", 0.12}};
  result["budget"] = {{"spent", {{"device_s", 3.5}}}};
  read_result_into(result, row);
  EXPECT_TRUE(row.completed);
  EXPECT_TRUE(row.correct);
  EXPECT_EQ(row.task, "softmax");
  EXPECT_EQ(row.backend, "cpu");
  EXPECT_EQ(row.best, "c");
  EXPECT_DOUBLE_EQ(row.speedup, 1.8);
  EXPECT_DOUBLE_EQ(row.speedup_ci_low, 1.7);
  EXPECT_DOUBLE_EQ(row.speedup_ci_high, 1.9);
  EXPECT_EQ(row.candidates, 3);
  EXPECT_EQ(row.correct_candidates, 2);
  EXPECT_EQ(row.device_s, 3.5);
  EXPECT_EQ(row.llm_cost_usd, 0.12);
  EXPECT_TRUE(row.failure.empty());
}

TEST(SuiteReport, RunWithoutACorrectCandidateIsCompletedButNotCorrect) {
  SuiteRow row;
  read_result_into(result_json(false), row);
  EXPECT_TRUE(row.completed);
  EXPECT_FALSE(row.correct);
  EXPECT_EQ(row.failure, "no candidate passed the correctness gate (3 evaluated)");
  EXPECT_FALSE(row.device_s.has_value());
  EXPECT_FALSE(row.llm_cost_usd.has_value());
}

TEST(SuiteReport, MalformedResultNamesTheField) {
  SuiteRow row;
  nlohmann::json result = result_json(true);
  result["final"]["speedup"].erase("speedup");
  try {
    read_result_into(result, row);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/final/speedup/speedup: missing"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(read_result_into(nlohmann::json::array(), row), Error);
  EXPECT_THROW(read_result_into({{"best", nullptr}}, row), Error);  // no candidates
  result = result_json(true);
  result["final"]["speedup"]["speedup"] = 0.0;
  EXPECT_THROW(read_result_into(result, row), Error);
}

TEST(SuiteReport, DeviceSecondsAtTopLevelOrInTheBudget) {
  EXPECT_EQ(device_seconds({{"device_s", 2.0}}), 2.0);
  EXPECT_EQ(device_seconds({{"budget", {{"spent", {{"device_s", 4.0}}}}}}), 4.0);
  EXPECT_FALSE(device_seconds({{"wall_s", 1.0}}).has_value());
}

SuiteRow correct_row(const std::string& name, double speedup, double wall_s) {
  SuiteRow row;
  row.name = name;
  row.completed = true;
  row.correct = true;
  row.speedup = speedup;
  row.speedup_ci_low = speedup - 0.1;
  row.speedup_ci_high = speedup + 0.1;
  row.best = "best-" + name;
  row.candidates = 4;
  row.correct_candidates = 3;
  row.wall_s = wall_s;
  row.generator = "templates";
  row.family = name.substr(0, name.find('_'));
  return row;
}

// Golden output: two correct tasks at 1.5x (a degenerate interval, so the golden text does not
// depend on the random resampling), one run without a correct candidate, one failed child.
TEST(SuiteReport, MarkdownTableGolden) {
  std::vector<SuiteRow> rows = {correct_row("gemv", 1.5, 10.0), correct_row("rmsnorm", 1.5, 20.0)};
  rows[1].resumed = true;
  rows[0].reference_ms = 2.5;
  SuiteRow incorrect;
  incorrect.name = "softmax";
  incorrect.completed = true;
  incorrect.candidates = 2;
  incorrect.wall_s = 5.0;
  incorrect.generator = "templates";
  incorrect.family = "softmax";
  incorrect.exit = "exit code 0";
  incorrect.failure = "no candidate passed the correctness gate (2 evaluated)";
  rows.push_back(incorrect);
  SuiteRow failed;
  failed.name = "broken";
  failed.wall_s = 0.5;
  failed.exit = "exit code 1";
  failed.failure = "task.toml: inputs[0].dtype: unknown dtype 'float32' (expected f32|f16)";
  failed.log_path = "/s/logs/broken.log";
  rows.push_back(failed);
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) outcomes.push_back(row.outcome());
  std::string text = render_suite_markdown(rows, compute_suite_metrics(outcomes));
  const std::string expected =
      "# kforge suite: 4 tasks\n"
      "\n"
      "| tasks | correct | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean speedup (correct tasks) "
      "|\n"
      "| ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"
      "| 4 | 50.0% (2) | 50.0% | 50.0% | 0.0% | 0.0% | 1.500x (95% CI 1.500x-1.500x, 2 tasks) |\n"
      "\n"
      "fast_p: share of all tasks that are correct with speedup > p (KernelBench); the geomean is "
      "over correct tasks, its interval a bootstrap over tasks.\n"
      "\n"
      "Cost:\n"
      "- wall time: 8.9 s per task, 35.5 s in all (4 of 4 tasks reported it)\n"
      "- device time: not reported\n"
      "- LLM cost: not reported\n"
      "\n"
      "| task | run | correct | speedup | CI | reference ms | generator | family | best | "
      "candidates (correct) | wall s | device s | LLM $ | why no correct candidate |\n"
      "| --- | --- | --- | ---: | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | --- "
      "|\n"
      "| gemv | completed | yes | 1.500x | 1.400-1.600x | 2.5000 | templates | gemv | best-gemv | "
      "4 (3) | 10.0 | - | - | - |\n"
      "| rmsnorm | earlier run | yes | 1.500x | 1.400-1.600x | - | templates | rmsnorm | "
      "best-rmsnorm | 4 (3) | 20.0 | - | - | - |\n"
      "| softmax | completed | no | - | - | - | templates | softmax | - | 2 (0) | 5.0 | - | - | no "
      "candidate passed the correctness gate (2 evaluated) |\n"
      "| broken | error | no | - | - | - | - | - | - | - | 0.5 | - | - | task.toml: "
      "inputs[0].dtype: unknown dtype 'float32' (expected f32\\|f16) |\n"
      "\n"
      "Errors (the run did not finish; counted as not correct):\n"
      "- broken (exit code 1): task.toml: inputs[0].dtype: unknown dtype 'float32' (expected "
      "f32\\|f16)\n"
      "  log: /s/logs/broken.log\n"
      "\n"
      "Not correct:\n"
      "- softmax: no candidate passed the correctness gate (2 evaluated)\n";
  EXPECT_EQ(text, expected);
}

// --baseline compile: rows with a measured, a cached and a failed torch.compile baseline, and a
// problem no family serves. Equal speedups keep the bootstrap intervals degenerate.
std::vector<SuiteRow> compile_rows() {
  std::vector<SuiteRow> rows = {correct_row("softmax_23", 1.5, 10.0),
                                correct_row("rmsnorm_36", 1.5, 20.0),
                                correct_row("layernorm_40", 1.5, 30.0)};
  for (SuiteRow& row : rows) {
    row.baseline = "compile";
    row.compile_status = "measured";
    row.compile_speedup = 1.2;
    row.compile_ci_low = 1.1;
    row.compile_ci_high = 1.3;
  }
  rows[1].compile_status = "cached";
  rows[1].compile_note = "cached from 2025-06-01T10:00:00Z (run /runs/a)";
  rows[2].compile_status = "failed";
  rows[2].compile_speedup.reset();
  rows[2].compile_note = "runtime_error: torch.compile of layernorm_40.py failed: no lowering";
  SuiteRow unserved;
  unserved.name = "cumsum_89";
  unserved.wall_s = 3.0;  // its reference check
  unserved.exit = "not run";
  unserved.unserved = true;
  unserved.reference_ms = 0.125;
  unserved.reference_check = "ran";
  unserved.generator = "templates";
  unserved.failure = "cumsum_89.py: no built-in kernel family computes what this module computes "
                     "(families tried: softmax); --generator llm writes a kernel for it";
  unserved.log_path = "/s/logs/cumsum_89.log";
  rows.push_back(unserved);
  SuiteRow crashed;
  crashed.name = "argmax_51";
  crashed.wall_s = 0.5;
  crashed.exit = "killed by SIGSEGV";
  crashed.failure = "Segmentation fault";
  crashed.log_path = "/s/logs/argmax_51.log";
  rows.push_back(crashed);
  return rows;
}

TEST(SuiteReport, CompileBaselineMarkdownGolden) {
  const std::vector<SuiteRow> rows = compile_rows();
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) outcomes.push_back(row.outcome());
  const std::string text = render_suite_markdown(rows, compute_suite_metrics(outcomes));
  const std::string expected =
      "# kforge suite: 5 tasks\n"
      "\n"
      "| baseline | tasks | correct | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean speedup "
      "(correct tasks) |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"
      "| eager | 5 | 60.0% (3) | 60.0% | 60.0% | 0.0% | 0.0% | 1.500x (95% CI 1.500x-1.500x, 3 "
      "tasks) |\n"
      "| torch.compile | 4 | 50.0% (2) | 50.0% | 50.0% | 0.0% | 0.0% | 1.200x (95% CI "
      "1.200x-1.200x, 2 tasks) |\n"
      "\n"
      "fast_p: share of all tasks that are correct with speedup > p (KernelBench); the geomean is "
      "over correct tasks, its interval a bootstrap over tasks.\n"
      "torch.compile: the best against torch.compile of the reference, timed with it at the "
      "final rung (or through a cached compile/eager ratio, marked); 1 task without a "
      "torch.compile baseline left out (listed below).\n"
      "\n"
      "Cost:\n"
      "- wall time: 12.7 s per task, 63.5 s in all (5 of 5 tasks reported it)\n"
      "- device time: not reported\n"
      "- LLM cost: not reported\n"
      "\n"
      "| task | run | correct | speedup | CI | vs compile | CI | reference ms | generator | "
      "family | best | candidates (correct) | wall s | device s | LLM $ | why no correct "
      "candidate |\n"
      "| --- | --- | --- | ---: | --- | ---: | --- | ---: | --- | --- | --- | ---: | ---: | ---: | "
      "---: | --- |\n"
      "| softmax_23 | completed | yes | 1.500x | 1.400-1.600x | 1.200x | 1.100-1.300x | - | "
      "templates | softmax | best-softmax_23 | 4 (3) | 10.0 | - | - | - |\n"
      "| rmsnorm_36 | completed | yes | 1.500x | 1.400-1.600x | 1.200x (cached) | 1.100-1.300x | "
      "- | templates | rmsnorm | best-rmsnorm_36 | 4 (3) | 20.0 | - | - | - |\n"
      "| layernorm_40 | completed | yes | 1.500x | 1.400-1.600x | none | - | - | templates | "
      "layernorm | best-layernorm_40 | 4 (3) | 30.0 | - | - | - |\n"
      "| cumsum_89 | reference only | no | - | - | - | - | 0.1250 | templates | - | - | - | 3.0 | "
      "- | - | cumsum_89.py: no built-in kernel family computes what this module computes "
      "(families tried: softmax); --generator llm writes a kernel for it |\n"
      "| argmax_51 | error | no | - | - | - | - | - | - | - | - | - | 0.5 | - | - | Segmentation "
      "fault |\n"
      "\n"
      "Errors (the run did not finish; counted as not correct):\n"
      "- argmax_51 (killed by SIGSEGV): Segmentation fault\n"
      "  log: /s/logs/argmax_51.log\n"
      "\n"
      "Not served (not run: no built-in kernel family computes these, and the templates "
      "generator writes only those; `--generator llm` writes kernels for them; counted as not "
      "correct): cumsum_89\n"
      "\n"
      "No torch.compile baseline (left out of the torch.compile row):\n"
      "- layernorm_40: runtime_error: torch.compile of layernorm_40.py failed: no lowering\n";
  EXPECT_EQ(text, expected);
}

TEST(SuiteReport, ReadsTheCompileBaselineGeneratorAndFamilyFromAResult) {
  nlohmann::json result = result_json(true);
  result["generator"] = "templates";
  result["family"] = "softmax";
  result["baseline"] = "compile";
  result["compile_baseline"] = {{"status", "cached"},
                                {"message", ""},
                                {"cached", {{"measured_at", "2025-06-01T10:00:00Z"},
                                            {"run_dir", "/runs/a"}}}};
  result["final"]["speedup_vs_compile"] = {
      {"speedup", 1.25}, {"ci_low", 1.2}, {"ci_high", 1.3}, {"level", 0.95}};
  SuiteRow row;
  read_result_into(result, row);
  EXPECT_EQ(row.generator, "templates");
  EXPECT_EQ(row.family, "softmax");
  EXPECT_EQ(row.baseline, "compile");
  EXPECT_EQ(row.compile_status, "cached");
  ASSERT_TRUE(row.compile_speedup);
  EXPECT_DOUBLE_EQ(*row.compile_speedup, 1.25);
  EXPECT_DOUBLE_EQ(row.compile_ci_high, 1.3);
  EXPECT_EQ(row.compile_note, "cached from 2025-06-01T10:00:00Z (run /runs/a)");
  const nlohmann::json j = row.to_json();
  EXPECT_DOUBLE_EQ(j["speedup_vs_compile"]["speedup"].get<double>(), 1.25);
  // A result.json from before --baseline: eager, no compile numbers.
  SuiteRow old;
  read_result_into(result_json(true), old);
  EXPECT_EQ(old.baseline, "eager");
  EXPECT_FALSE(old.compile_speedup);
  // A run that did not finish: its run.json says what served it.
  SuiteRow unfinished;
  read_run_into({{"generator", "llm"}, {"family", ""}}, unfinished);
  EXPECT_EQ(unfinished.generator, "llm");
}

TEST(SuiteReport, SuiteJsonCarriesTheAggregateAgainstTorchCompile) {
  const std::vector<SuiteRow> rows = compile_rows();
  std::vector<SuiteTaskOutcome> outcomes;
  for (const SuiteRow& row : rows) outcomes.push_back(row.outcome());
  const nlohmann::json j = suite_json(rows, compute_suite_metrics(outcomes), "/s", {});
  EXPECT_EQ(j["aggregate"]["tasks"], 5);
  EXPECT_EQ(j["aggregate_vs_compile"]["tasks"], 4);
  EXPECT_EQ(j["aggregate_vs_compile"]["left_out"], 1);
  EXPECT_EQ(j["aggregate_vs_compile"]["correct"], 2);
  // A problem no family serves is its own status, not correct and not an error.
  EXPECT_EQ(j["tasks"][3]["status"], "not served");
  EXPECT_EQ(j["tasks"][3]["unserved"], true);
  EXPECT_EQ(j["tasks"][3]["reference_check"], "ran");
  EXPECT_DOUBLE_EQ(j["tasks"][3]["reference_ms"].get<double>(), 0.125);
  EXPECT_TRUE(j["tasks"][4]["reference_ms"].is_null());
  EXPECT_EQ(j["tasks"][4]["status"], "error");
  EXPECT_FALSE(rows[3].errored());
  EXPECT_TRUE(rows[4].errored());
  EXPECT_DOUBLE_EQ(j["aggregate_vs_compile"]["geomean_speedup"]["geomean"].get<double>(), 1.2);
  // Without --baseline compile there is no such aggregate.
  std::vector<SuiteRow> eager = {correct_row("gemv", 2.5, 3.0)};
  EXPECT_TRUE(suite_json(eager, compute_suite_metrics(std::vector<SuiteTaskOutcome>{
                                    eager[0].outcome()}),
                         "/s", {})["aggregate_vs_compile"]
                  .is_null());
}

TEST(SuiteReport, SuiteJsonHoldsRowsAndAggregate) {
  std::vector<SuiteRow> rows = {correct_row("gemv", 2.5, 3.0)};
  std::vector<SuiteTaskOutcome> outcomes = {rows[0].outcome()};
  nlohmann::json j = suite_json(rows, compute_suite_metrics(outcomes), "/s", {"--steps", "1"});
  EXPECT_EQ(j["suite_dir"], "/s");
  EXPECT_EQ(j["optimize_args"], nlohmann::json({"--steps", "1"}));
  ASSERT_EQ(j["tasks"].size(), 1u);
  EXPECT_EQ(j["tasks"][0]["name"], "gemv");
  EXPECT_DOUBLE_EQ(j["tasks"][0]["speedup"]["speedup"].get<double>(), 2.5);
  EXPECT_TRUE(j["tasks"][0]["device_s"].is_null());
  EXPECT_EQ(j["aggregate"]["fast_p"][3]["count"], 1);
  EXPECT_DOUBLE_EQ(j["aggregate"]["geomean_speedup"]["geomean"].get<double>(), 2.5);
}

}  // namespace
}  // namespace kforge::report

#include "report/summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace kforge::report {
namespace {

// The parts of result.json (OptimizeResult::to_json plus run_optimize's fields) the summary reads.
nlohmann::json result_with_workloads(double llm_speedup) {
  nlohmann::json best = {{"id", "split_row[CHUNK=16384]"},
                         {"source", "/run/best.cu"},
                         {"full_geomean_speedup", std::sqrt(37.7 * llm_speedup)},
                         {"full_workload_speedups",
                          {{{"workload", "kernelbench"}, {"speedup", 37.7}},
                           {{"workload", "llm"}, {"speedup", llm_speedup}}}}};
  nlohmann::json sample = {{"median_ms", 0.22}, {"min_ms", 0.21}, {"max_ms", 0.23}, {"count", 50}};
  return {{"backend", "cuda"},
          {"device", {{"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}},
          {"toolchain", "nvcc 13.0"},
          {"wall_s", 40.0},
          {"run_dir", "/run"},
          {"bytes_moved", 537000000},
          {"candidates", {{{"id", "split_row[CHUNK=16384]"}, {"verdict", "ok"}}}},
          {"best", best},
          {"final",
           {{"reference", sample},
            {"best", sample},
            {"speedup", {{"speedup", 37.7}, {"ci_low", 37.6}, {"ci_high", 37.8}, {"level", 0.95}}}}}};
}

TEST(Summary, NamesEveryTimedWorkloadAndWarnsWhereTheBestIsSlower) {
  const nlohmann::json result = result_with_workloads(0.027);
  const std::string console = render_console_summary(result, "layernorm");
  EXPECT_NE(console.find("workloads:  kernelbench 37.70x, llm 0.03x (rung 2, geomean 1.01x)"),
            std::string::npos) << console;
  EXPECT_NE(console.find("warning:    slower than the reference on llm (0.03x)"), std::string::npos)
      << console;
  const std::string markdown = render_markdown(result, "layernorm");
  EXPECT_NE(markdown.find("**Slower than the reference on llm (0.03x)**"), std::string::npos)
      << markdown;
}

TEST(Summary, NoWarningWhenTheBestWinsEverywhere) {
  const std::string console = render_console_summary(result_with_workloads(1.2), "layernorm");
  EXPECT_NE(console.find("workloads:  kernelbench 37.70x, llm 1.20x"), std::string::npos);
  EXPECT_EQ(console.find("warning:"), std::string::npos) << console;
}

TEST(Summary, OneTimedWorkloadOrNoRungTwoAddsNoWorkloadLine) {
  nlohmann::json result = result_with_workloads(1.2);
  result["best"].erase("full_workload_speedups");
  result["best"]["full_geomean_speedup"] = nullptr;
  EXPECT_EQ(render_console_summary(result, "layernorm").find("workloads:"), std::string::npos);
}

TEST(Summary, WarnsWhenTheBestIsSlowerThanTheReferenceAtTheFinalRung) {
  // A busy machine's noise can leave a best that the final rung finds slower: the summary said
  // "speedup: 0.87x" and "optimized" without a word.
  nlohmann::json result = result_with_workloads(1.2);
  result["best"].erase("full_workload_speedups");
  result["final"]["speedup"] = {{"speedup", 0.87}, {"ci_low", 0.80}, {"ci_high", 0.97}, {"level", 0.95}};
  const std::string console = render_console_summary(result, "relu");
  EXPECT_NE(console.find("warning:    the best is slower than the reference (0.87x, the whole 95% "
                         "CI below 1x): keep the reference"),
            std::string::npos)
      << console;
  EXPECT_NE(render_markdown(result, "relu").find("**Warning:** the best is slower than the reference"),
            std::string::npos);
  // An interval reaching 1x is a tie, not a loss.
  result["final"]["speedup"]["ci_high"] = 1.02;
  EXPECT_EQ(render_console_summary(result, "relu").find("warning:"), std::string::npos);
}

TEST(Summary, WarnsWhenTheBestIsTheReferenceAndTheLlmNeverAnswered) {
  // --generator llm with a dead endpoint: every request failed, the best is the reference seed,
  // and the run ended like a success.
  nlohmann::json result = result_with_workloads(1.2);
  result["best"]["id"] = "reference-seed";
  result["llm"] = {{"requests", 0}, {"failures", 11}};
  const std::string console = render_console_summary(result, "rowmax");
  EXPECT_NE(console.find("warning:    the best is the task's reference itself"), std::string::npos)
      << console;
  EXPECT_NE(console.find("warning:    the LLM endpoint answered none of 11 requests"),
            std::string::npos)
      << console;
  result["llm"]["requests"] = 3;
  EXPECT_EQ(render_console_summary(result, "rowmax").find("LLM endpoint"), std::string::npos);
}

// result.json's parts of --baseline compile (OptimizeResult::to_json, CompileBaselineResult).
nlohmann::json with_compile(nlohmann::json result, const std::string& status) {
  const nlohmann::json interval = {{"speedup", 1.4}, {"ci_low", 1.3}, {"ci_high", 1.5}, {"level", 0.95}};
  nlohmann::json compile = {{"status", status}, {"message", ""}, {"compile_s", 23.44},
                            {"drift_warning", ""}, {"final", nullptr}, {"over_eager", nullptr},
                            {"best_speedup", nullptr}, {"cached", nullptr}};
  result["baseline"] = "compile";
  if (status == "measured") {
    compile["final"] = {{"median_ms", 0.8}, {"min_ms", 0.79}, {"max_ms", 0.83}, {"count", 50}};
    compile["over_eager"] = {{"speedup", 1.5}, {"ci_low", 1.45}, {"ci_high", 1.55}, {"level", 0.95}};
    compile["best_speedup"] = interval;
    result["final"]["compile"] = compile["final"];
  } else if (status == "cached") {
    compile["best_speedup"] = interval;
    compile["cached"] = {{"ok", true}, {"over_eager", {{"speedup", 1.5}, {"ci_low", 1.4},
                                                       {"ci_high", 1.6}, {"level", 0.95}}},
                         {"compile_s", 31.0}, {"measured_at", "2025-06-01T10:00:00Z"},
                         {"run_dir", "/runs/earlier"}};
  } else {
    compile["message"] = "runtime_error: torch.compile of /p/x.py (workload 'problem') failed: "
                         "InductorError: no lowering";
  }
  result["compile_baseline"] = compile;
  result["final"]["speedup_vs_compile"] = compile["best_speedup"];
  return result;
}

TEST(Summary, NamesTheSpeedupOverTorchCompileAndItsCompileTimeApart) {
  const nlohmann::json result = with_compile(result_with_workloads(1.2), "measured");
  const std::string console = render_console_summary(result, "softmax");
  EXPECT_NE(console.find("  vs compile: 1.40x [95% CI 1.30x .. 1.50x]; torch.compile 0.8000 ms "
                         "median (1.50x over eager), compiled in 23.4 s (not in any sample)\n"),
            std::string::npos)
      << console;
  const std::string markdown = render_markdown(result, "softmax");
  EXPECT_NE(markdown.find("| torch.compile | 0.8000 | 0.7900 | 0.8300 | 50 | - |"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("Over torch.compile of the reference: 1.400x [95% CI 1.300x .. 1.500x]"),
            std::string::npos)
      << markdown;
  // --baseline eager says nothing of torch.compile.
  const std::string eager = render_console_summary(result_with_workloads(1.2), "softmax");
  EXPECT_EQ(eager.find("compile"), std::string::npos) << eager;
}

TEST(Summary, SaysWhenTheCompileBaselineCameFromTheCacheAndFromWhen) {
  nlohmann::json result = with_compile(result_with_workloads(1.2), "cached");
  std::string console = render_console_summary(result, "softmax");
  EXPECT_NE(console.find("vs compile: 1.40x [95% CI 1.30x .. 1.50x]; through torch.compile's 1.50x "
                         "over eager cached from 2025-06-01T10:00:00Z (run /runs/earlier), "
                         "compiled then in 31.0 s"),
            std::string::npos)
      << console;
  EXPECT_EQ(console.find("warning:"), std::string::npos) << console;
  result["compile_baseline"]["drift_warning"] = "the reference (eager) takes 0.2 ms now";
  console = render_console_summary(result, "softmax");
  EXPECT_NE(console.find("warning:    the reference (eager) takes 0.2 ms now"), std::string::npos)
      << console;
}

TEST(Summary, SaysWhyThereIsNoSpeedupOverTorchCompile) {
  const nlohmann::json result = with_compile(result_with_workloads(1.2), "failed");
  EXPECT_NE(render_console_summary(result, "softmax")
                .find("  vs compile: none: runtime_error: torch.compile of /p/x.py (workload "
                      "'problem') failed: InductorError: no lowering\n"),
            std::string::npos);
  EXPECT_NE(render_markdown(result, "softmax").find("Over torch.compile of the reference: none: "),
            std::string::npos);
}

TEST(Summary, NoCorrectCandidateCountsTheVerdicts) {
  nlohmann::json result = result_with_workloads(1.2);
  result["best"] = nullptr;
  result["candidates"] = {{{"verdict", "wrong_answer"}},
                          {{"verdict", "worker_crashed"}},
                          {{"verdict", "wrong_answer"}}};
  EXPECT_NE(render_console_summary(result, "relu")
                .find("no correct candidate (2 wrong_answer, 1 worker_crashed)"),
            std::string::npos);
  EXPECT_NE(render_markdown(result, "relu").find("No correct candidate (2 wrong_answer, 1 "
                                                 "worker_crashed)."),
            std::string::npos);
  // Ctrl-C before the first candidate.
  result["candidates"] = nlohmann::json::array();
  EXPECT_NE(render_console_summary(result, "relu").find("no correct candidate (none was evaluated)"),
            std::string::npos);
}

TEST(Summary, NoCorrectCandidateSaysWhyTheSearchStoppedAndWhatWasNeverWritten) {
  // --generator llm on a PyTorch problem whose first kernel never passed the gate.
  nlohmann::json result = result_with_workloads(1.2);
  result["best"] = nullptr;
  result["candidates"] = {{{"verdict", "compile_error"}}, {{"verdict", "wrong_answer"}}};
  result["generation_failures"] = 1;
  result["stopped_early"] = "no first kernel the generator wrote passed the gate";
  const std::string console = render_console_summary(result, "linear_relu");
  EXPECT_NE(console.find("no correct candidate (1 compile_error, 1 wrong_answer; 1 proposal the "
                         "generator could not write)"),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("  stopped:    no first kernel the generator wrote passed the gate\n"),
            std::string::npos)
      << console;
  const std::string markdown = render_markdown(result, "linear_relu");
  EXPECT_NE(markdown.find("Stopped: no first kernel the generator wrote passed the gate."),
            std::string::npos)
      << markdown;
}

}  // namespace
}  // namespace kforge::report

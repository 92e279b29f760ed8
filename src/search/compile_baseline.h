// The torch.compile baseline of a run (`--baseline compile`, issue 18): what the command decided
// before the run (measure it, or take what the baseline cache kept from an earlier run), and
// what the run reports (result.json "compile_baseline", the final rung's "speedup_vs_compile").
//
// Measured: prepare() compiles the reference module once (its compile time, reported apart)
// and rung 3 times the reference (eager), torch.compile of it and the best interleaved, so the
// best's speedup over torch.compile is a paired comparison like the one over eager. Cached: an
// earlier run's paired compile-vs-eager ratio on the same problem hash, workload, device and
// PyTorch (report/baseline_cache.h) is combined with this run's paired best-vs-eager ratio
// (evaluation::speedup_through); nothing is compiled. A cached failure is not retried.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluation/evaluator.h"
#include "evaluation/statistics.h"

namespace kforge::search {

/// An earlier run's torch.compile baseline of this problem, workload, device and PyTorch, as
/// the baseline cache keeps it.
struct CachedCompileBaseline {
  bool ok = true;                          // false: the compile failed then; `message` says why
  std::string message;
  evaluation::SpeedupEstimate over_eager;  // eager / compile, paired over that run's rounds
  double eager_median_ms = 0.0;            // that run's rung-3 medians
  double compile_median_ms = 0.0;
  double compile_s = 0.0;                  // that run's compile time
  std::string measured_at;                 // UTC, ISO 8601
  std::string run_dir;                     // the run that measured it
};

/// What a run does about torch.compile, decided before it starts (cli/optimize_baseline.h).
struct CompileBaselinePlan {
  enum class Source {
    none,            // --baseline eager
    measure,         // compile and time it in this run (EvaluationPolicy::baseline = compile)
    cache,           // use `cached` (its ratio, or its failure) without compiling
    not_applicable,  // the reference is not a PyTorch module: `note` says so
  };
  Source source = Source::none;
  std::string note;
  std::optional<CachedCompileBaseline> cached;
};

/// What became of the torch.compile baseline in a run.
enum class CompileBaselineStatus { measured, cached, failed, not_applicable };
std::string to_string(CompileBaselineStatus status);

/// The torch.compile baseline as the run reports it.
struct CompileBaselineResult {
  CompileBaselineStatus status = CompileBaselineStatus::not_applicable;
  std::string message;          // failed / not_applicable: why; else empty
  double compile_s = 0.0;       // torch.compile plus the first call (measured, or cached)
  double probe_median_ms = 0.0; // measured: the compiled module's quick timing at prepare()
  /// Rung 3 (measured): the compiled module's samples, and the reference's (eager) beside them.
  std::vector<double> compile_samples_ms;
  std::vector<double> eager_samples_ms;
  std::optional<evaluation::SampleSummary> final;
  std::optional<evaluation::SpeedupEstimate> over_eager;    // eager / compile
  std::optional<evaluation::SpeedupEstimate> best_speedup;  // compile / best
  /// Status cached (or failed, from the cache): the entry, i.e. from when and which run.
  std::optional<CachedCompileBaseline> cached;
  /// A cached ratio whose eager median differs from this run's by more than 10%: the device
  /// or its load changed, so the ratio may not hold; empty otherwise.
  std::string drift_warning;

  /// result.json's "compile_baseline" (samples left out: they are in the cache).
  nlohmann::json to_json() const;
};

/// The result before any timing: what `plan` and prepare()'s probe say (status measured with
/// the compile time, failed with the probe's message, cached, or not_applicable).
CompileBaselineResult start_compile_baseline(const CompileBaselinePlan& plan,
                                             const evaluation::CompileProbe& probe);

/// Completes `result` after rung 3: with `paired`'s compile rounds, the compiled module's
/// summary and the paired ratios (eager over compile, compile over the best, judged as
/// judge_paired at `level` with `seed`); a compile that failed in the rounds makes it failed;
/// a cached one gets the best's speedup through `best_over_eager` and a drift check against
/// `eager_median_ms`, this run's rung-3 reference median.
void finish_compile_baseline(CompileBaselineResult& result,
                             const evaluation::EvaluationPlane::PairedSamples& paired,
                             const evaluation::SpeedupEstimate& best_over_eager,
                             double eager_median_ms, double level, uint64_t seed);

}  // namespace kforge::search

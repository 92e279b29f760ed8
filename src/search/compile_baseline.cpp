#include "search/compile_baseline.h"

#include <cmath>

#include <fmt/format.h>

#include "evaluation/measurement.h"

namespace kforge::search {
namespace {

// A cached ratio is taken as this run's when the eager medians agree within this: beyond it
// the device, its clocks or its load changed enough that the ratio may have too.
constexpr double kEagerDriftLimit = 0.10;

nlohmann::json cached_json(const CachedCompileBaseline& c) {
  nlohmann::json j = {{"ok", c.ok},
                      {"message", c.message},
                      {"eager_median_ms", c.eager_median_ms},
                      {"compile_median_ms", c.compile_median_ms},
                      {"compile_s", c.compile_s},
                      {"measured_at", c.measured_at},
                      {"run_dir", c.run_dir}};
  j["over_eager"] = c.ok ? nlohmann::json(c.over_eager) : nlohmann::json();
  return j;
}

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

}  // namespace

std::string to_string(CompileBaselineStatus status) {
  switch (status) {
    case CompileBaselineStatus::measured: return "measured";
    case CompileBaselineStatus::cached: return "cached";
    case CompileBaselineStatus::failed: return "failed";
    case CompileBaselineStatus::not_applicable: return "not_applicable";
  }
  return "unknown";
}

nlohmann::json CompileBaselineResult::to_json() const {
  nlohmann::json j = {{"status", search::to_string(status)},
                      {"message", message},
                      {"compile_s", compile_s},
                      {"probe_median_ms", probe_median_ms},
                      {"drift_warning", drift_warning}};
  j["final"] = optional_json(final);
  j["over_eager"] = optional_json(over_eager);
  j["best_speedup"] = optional_json(best_speedup);
  j["cached"] = cached ? cached_json(*cached) : nlohmann::json();
  return j;
}

CompileBaselineResult start_compile_baseline(const CompileBaselinePlan& plan,
                                             const evaluation::CompileProbe& probe) {
  CompileBaselineResult result;
  switch (plan.source) {
    case CompileBaselinePlan::Source::none:
    case CompileBaselinePlan::Source::not_applicable:
      result.message = plan.note;
      return result;
    case CompileBaselinePlan::Source::cache:
      result.cached = plan.cached;
      result.status = plan.cached && plan.cached->ok ? CompileBaselineStatus::cached
                                                     : CompileBaselineStatus::failed;
      if (plan.cached) {
        result.compile_s = plan.cached->compile_s;
        if (!plan.cached->ok) {
          result.message = fmt::format("{} (cached from {}, run {}; not retried)",
                                       plan.cached->message, plan.cached->measured_at,
                                       plan.cached->run_dir);
        }
      }
      return result;
    case CompileBaselinePlan::Source::measure:
      break;
  }
  if (probe.ok) {
    result.status = CompileBaselineStatus::measured;
    result.compile_s = probe.compile_ms / 1e3;
    result.probe_median_ms = probe.median_ms;
  } else {
    result.status = CompileBaselineStatus::failed;
    result.message = probe.ran ? probe.message : "the reference was not compiled";
  }
  return result;
}

void finish_compile_baseline(CompileBaselineResult& result,
                             const evaluation::EvaluationPlane::PairedSamples& paired,
                             const evaluation::SpeedupEstimate& best_over_eager,
                             double eager_median_ms, double level, uint64_t seed) {
  if (result.status == CompileBaselineStatus::cached) {
    const CachedCompileBaseline& cached = *result.cached;
    result.best_speedup = evaluation::speedup_through(best_over_eager, cached.over_eager);
    const double drift = eager_median_ms / cached.eager_median_ms - 1.0;
    if (cached.eager_median_ms > 0.0 && std::abs(drift) > kEagerDriftLimit) {
      result.drift_warning = fmt::format(
          "the reference (eager) takes {:.4f} ms now and took {:.4f} ms when the torch.compile "
          "ratio was cached ({}): the cached ratio may not hold (--baseline-cache refresh "
          "measures it again)",
          eager_median_ms, cached.eager_median_ms, cached.measured_at);
    }
    return;
  }
  if (result.status != CompileBaselineStatus::measured) return;
  if (paired.compile_rounds.empty()) {
    result.status = CompileBaselineStatus::failed;
    result.message = "final rung: " + (paired.compile_failure.empty()
                                           ? std::string("the compiled module was not timed")
                                           : paired.compile_failure);
    return;
  }
  result.compile_samples_ms.clear();
  for (const auto& round : paired.compile_rounds) {
    result.compile_samples_ms.insert(result.compile_samples_ms.end(), round.begin(), round.end());
  }
  result.eager_samples_ms = paired.reference_ms();
  result.final = evaluation::summarize(result.compile_samples_ms);
  // min_gain only decides faster/slower/tie, which is not reported here: 0.
  result.over_eager =
      evaluation::judge_paired(paired.reference_rounds, paired.compile_rounds, level, 0.0, seed)
          .speedup;
  result.best_speedup =
      evaluation::judge_paired(paired.compile_rounds, paired.candidate_rounds, level, 0.0, seed)
          .speedup;
}

}  // namespace kforge::search

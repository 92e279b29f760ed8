#include "memory/diagnosis.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace kforge::memory {
namespace {

std::string lowercase(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

bool contains(const std::string& text, std::string_view word) {
  return text.find(word) != std::string::npos;
}

TriggerMatch judge(std::optional<bool> holds) {
  if (!holds.has_value()) return TriggerMatch::unknown;
  return *holds ? TriggerMatch::matches : TriggerMatch::contradicts;
}

// The N of "below N%" in `text`, if any.
std::optional<double> percent_below(const std::string& text) {
  std::size_t at = text.find("below ");
  while (at != std::string::npos) {
    const char* start = text.c_str() + at + 6;
    char* end = nullptr;
    double value = std::strtod(start, &end);
    if (end != start && *end == '%') return value;
    at = text.find("below ", at + 1);
  }
  return std::nullopt;
}

}  // namespace

std::string Diagnosis::summary() const {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : " ") + part; };
  char number[32];
  if (!verdict.empty()) add("verdict=" + verdict);
  if (log_gain) {
    std::snprintf(number, sizeof number, "%+.3f", *log_gain);
    add(std::string("gain=") + number);
  }
  if (bandwidth_fraction) {
    std::snprintf(number, sizeof number, "%.2f", *bandwidth_fraction);
    add(std::string("bandwidth=") + number);
  }
  if (memory_bound) add(std::string("memory_bound=") + (*memory_bound ? "yes" : "no"));
  return text;
}

Diagnosis diagnose(const std::string& verdict, std::optional<double> log_gain,
                   std::optional<double> median_ms, double bytes_moved, std::optional<double> flops,
                   double copy_bytes_per_s, double peak_flops_per_s) {
  Diagnosis diagnosis;
  diagnosis.verdict = verdict;
  if (verdict == "ok") diagnosis.log_gain = log_gain;
  if (median_ms && *median_ms > 0.0 && bytes_moved > 0.0 && copy_bytes_per_s > 0.0) {
    diagnosis.bandwidth_fraction = bytes_moved / (*median_ms * 1e-3) / copy_bytes_per_s;
  }
  if (flops && *flops >= 0.0 && bytes_moved > 0.0 && copy_bytes_per_s > 0.0 &&
      peak_flops_per_s > 0.0) {
    diagnosis.memory_bound = *flops / bytes_moved < peak_flops_per_s / copy_bytes_per_s;
  }
  return diagnosis;
}

TriggerMatch match_trigger(std::string_view trigger, const Diagnosis& diagnosis) {
  const std::string text = lowercase(trigger);
  const bool about_bandwidth = contains(text, "bandwidth") || contains(text, "copy");
  if (std::optional<double> percent = percent_below(text); percent && about_bandwidth) {
    if (!diagnosis.bandwidth_fraction) return TriggerMatch::unknown;
    return judge(*diagnosis.bandwidth_fraction < *percent / 100.0);
  }
  if (contains(text, "compile error") || contains(text, "fails to compile") ||
      contains(text, "does not compile")) {
    if (diagnosis.verdict.empty()) return TriggerMatch::unknown;
    return judge(diagnosis.compile_failed());
  }
  if (contains(text, "wrong answer") || contains(text, "tolerance") || contains(text, "accuracy")) {
    if (diagnosis.verdict.empty()) return TriggerMatch::unknown;
    return judge(diagnosis.wrong_answer());
  }
  if (contains(text, "compute-bound") || contains(text, "above the ridge point")) {
    if (!diagnosis.memory_bound) return TriggerMatch::unknown;
    return judge(!*diagnosis.memory_bound);
  }
  if (contains(text, "memory-bound") || about_bandwidth || contains(text, "bytes in flight")) {
    return judge(diagnosis.memory_bound);
  }
  return TriggerMatch::unknown;
}

bool triggered(const Strategy& strategy, const Diagnosis& diagnosis) {
  return std::any_of(strategy.triggers.begin(), strategy.triggers.end(),
                     [&](const std::string& trigger) {
                       return match_trigger(trigger, diagnosis) == TriggerMatch::matches;
                     });
}

}  // namespace kforge::memory

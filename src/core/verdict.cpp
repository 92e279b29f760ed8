#include "core/verdict.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

constexpr std::array<std::pair<Verdict, const char*>, 9> kVerdictNames = {{
    {Verdict::ok, "ok"},
    {Verdict::rejected_by_policy, "rejected_by_policy"},
    {Verdict::compile_error, "compile_error"},
    {Verdict::wrong_signature, "wrong_signature"},
    {Verdict::wrong_answer, "wrong_answer"},
    {Verdict::runtime_error, "runtime_error"},
    {Verdict::implausible_timing, "implausible_timing"},
    {Verdict::timeout, "timeout"},
    {Verdict::worker_crashed, "worker_crashed"},
}};

}  // namespace

std::string to_string(Verdict verdict) {
  for (const auto& [value, name] : kVerdictNames) {
    if (value == verdict) return name;
  }
  return "unknown";
}

Verdict parse_verdict(const std::string& name) {
  for (const auto& [value, known] : kVerdictNames) {
    if (name == known) return value;
  }
  std::string known;
  for (const auto& [value, verdict_name] : kVerdictNames) {
    known += (known.empty() ? "" : ", ") + std::string(verdict_name);
  }
  throw Error("unknown verdict '" + name + "' (expected one of " + known + ")");
}

}  // namespace kforge

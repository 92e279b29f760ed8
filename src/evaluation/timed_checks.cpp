#include "evaluation/timed_checks.h"

#include <algorithm>
#include <random>

#include "common/error.h"
#include "common/mapped_file.h"
#include "evaluation/comparison.h"
#include "evaluation/tolerance.h"
#include "worker/kernel_runner.h"

namespace kforge::evaluation {
namespace {

/// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): one 64-bit draw per step, enough for picking a few call indices.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

TimedChecks::TimedChecks(const Task& task, ReferenceOracle& oracle, uint64_t secret)
    : task_(task), oracle_(oracle), secret_(secret) {}

uint64_t TimedChecks::random_secret() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

std::string TimedChecks::key(const std::string& workload, uint64_t seed,
                             const std::string& distribution) {
  return workload + "/" + std::to_string(seed) + "/" + distribution;
}

std::vector<worker::TimedCheck> TimedChecks::plan(const GateCase& overwrite,
                                                  const worker::MeasurementPolicy& measurement,
                                                  int count) {
  return plan_timed_checks(secret_, requests_.fetch_add(1), overwrite, measurement, count);
}

std::vector<worker::TimedCheck> plan_timed_checks(uint64_t secret, uint64_t request,
                                                  const GateCase& overwrite,
                                                  const worker::MeasurementPolicy& measurement,
                                                  int count) {
  uint64_t state = secret ^ (request * 0xD1B54A32D192ED03ULL);
  const int calls = std::max(measurement.min_repetitions, 0);
  std::vector<int> order(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) order[static_cast<size_t>(i)] = i;
  // A partial Fisher-Yates shuffle: the first `count` entries are distinct uniform draws.
  const int taken = std::min(count, calls);
  std::vector<worker::TimedCheck> checks;
  for (int k = 0; k < taken; ++k) {
    const auto pick = static_cast<size_t>(k) + splitmix64(state) % static_cast<uint64_t>(calls - k);
    std::swap(order[static_cast<size_t>(k)], order[pick]);
    worker::TimedCheck check;
    check.call = order[static_cast<size_t>(k)];
    check.seed = overwrite.seed;
    check.distribution = overwrite.distribution;
    checks.push_back(check);
  }
  std::sort(checks.begin(), checks.end(),
            [](const worker::TimedCheck& a, const worker::TimedCheck& b) { return a.call < b.call; });
  // Both kinds in every request of two or more checks, the set's own values first: a check on
  // own values after an overwrite of the same set would find values that changed since that
  // set's last call (a kernel that skips unchanged inputs would compute there). One check alone
  // is of either kind.
  const bool single_overwrites = (splitmix64(state) & 1) != 0;
  for (int k = 0; k < taken; ++k) {
    checks[static_cast<size_t>(k)].overwrite = taken == 1 ? single_overwrites : 2 * k >= taken;
  }
  return checks;
}

void TimedChecks::add_verified(const std::string& workload, uint64_t seed,
                               const std::string& distribution, uint64_t digest) {
  std::lock_guard lock(mutex_);
  verified_[key(workload, seed, distribution)].insert(digest);
}

std::vector<worker::VerifiedDigest> TimedChecks::verified(const Workload& workload) {
  std::lock_guard lock(mutex_);
  std::vector<worker::VerifiedDigest> known;
  const std::string prefix = workload.name + "/";
  for (const auto& [inputs, digests] : verified_) {
    if (inputs.rfind(prefix, 0) != 0) continue;
    const size_t slash = inputs.find('/', prefix.size());
    const uint64_t seed = std::stoull(inputs.substr(prefix.size(), slash - prefix.size()));
    for (uint64_t digest : digests) known.push_back({seed, inputs.substr(slash + 1), digest});
  }
  return known;
}

std::string TimedChecks::verify(const worker::TimeRequest& request,
                                const worker::TimeResult& result, const std::string& rung) {
  if (result.checked.size() != request.checks.size()) {
    throw Error("worker ran " + std::to_string(result.checked.size()) + " of " +
                std::to_string(request.checks.size()) + " checked calls of a " + rung + " timing");
  }
  if (result.checked.empty()) return "";
  const Workload& workload = request.workload;
  for (size_t k = 0; k < result.checked.size(); ++k) {
    const worker::CheckedCall& checked = result.checked[k];
    const std::string inputs = key(workload.name, checked.seed, checked.distribution);
    if (checked.offset < 0) {
      if (checked.same_as >= 0) continue;  // the bytes of an earlier checked call: judged there
      std::lock_guard lock(mutex_);
      if (!verified_[inputs].contains(checked.digest)) {
        throw Error("worker claimed a verified digest kforge never verified (" + rung + ")");
      }
      continue;
    }
    const MappedFile got(worker::check_file(request.check_path, k), MappedFile::Mode::read);
    GateCase gate_case;
    gate_case.workload = workload;
    gate_case.seed = checked.seed;
    gate_case.distribution = checked.distribution;
    const ExpectedOutputs& expected = oracle_.expected(gate_case);
    for (const OutputLayout& output : output_layout(task_.signature, workload)) {
      const TensorSpec& spec = task_.signature.tensors[output.tensor];
      const OutputComparison comparison = compare_output(
          spec.dtype, got.bytes(output.offset, output.bytes),
          expected.file.bytes(output.offset, output.bytes), output.shape,
          tolerance_for(task_.tolerance, spec.dtype, workload.name));
      if (comparison.passed) continue;
      const std::string which = request.checks[k].overwrite
                                    ? "new input values written over a buffer used before"
                                    : "the rotated input set's own values";
      return "timed call " + std::to_string(checked.call) + " of the " + rung + " timing on '" +
             workload.name + "' (" + which + "): output '" + spec.name + "': " +
             comparison.failure +
             " - a kernel that skips work it does not expect to be checked, replays results "
             "from an earlier call, or leaves work unfinished when kforge_run returns";
    }
    std::lock_guard lock(mutex_);
    verified_[inputs].insert(checked.digest);
  }
  return "";
}

}  // namespace kforge::evaluation

// Checked calls inside timing requests: which timed calls of a candidate have their outputs
// compared with the reference's, and the comparison. DESIGN.md "Evaluation plane", step 5
// ("timed outputs re-checked"); issue 25 part 1.
//
// A kernel that counts calls, or recognizes inputs it has seen, can compute correctly exactly
// when it expects to be checked and skip its work otherwise. Three things close that: the worker
// poisons the outputs before every call (a skipped call leaves NaN, not the last call's answer);
// the checked calls are drawn from a secret of this process (std::random_device), never from
// the task or the run's seed, so a candidate cannot predict them; and some checks run on the
// rotated input set's own values, others on new values written over a set used before (a
// kernel replaying results by pointer fails those). Every timing request of a candidate checks:
// quick, full, each round of an acceptance comparison and of the final rung.
//
// Outputs whose digest was already verified for the same inputs are not read back again, so
// checks at gigabyte sizes cost a device hash rather than a read-back and a comparison.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "evaluation/reference_oracle.h"
#include "core/task.h"
#include "worker/protocol.h"

namespace kforge::evaluation {

/// The checks of request number `request` under `secret` (TimedChecks::plan's rule): `count`
/// distinct calls below measurement.min_repetitions, uniformly drawn (SplitMix64 from secret and
/// request), the earlier half on the sets' own values, the later half on `overwrite`'s inputs;
/// a single check of a drawn kind. Deterministic; sorted by call.
std::vector<worker::TimedCheck> plan_timed_checks(uint64_t secret, uint64_t request,
                                                  const GateCase& overwrite,
                                                  const worker::MeasurementPolicy& measurement,
                                                  int count);

class TimedChecks {
 public:
  /// `secret`: the seed of every draw; pass a random value (random_secret()) except in tests.
  TimedChecks(const Task& task, ReferenceOracle& oracle, uint64_t secret);

  /// A fresh 64-bit secret from std::random_device.
  static uint64_t random_secret();

  /// `count` distinct timed calls below measurement.min_repetitions (fewer when it is smaller),
  /// uniformly drawn, each on the rotated set's own inputs or on `overwrite`'s inputs written
  /// over that set first (restored after the call): with two or more checks the earlier half on
  /// own values and the later half overwritten, one check alone of a drawn kind. Thread-safe.
  std::vector<worker::TimedCheck> plan(const GateCase& overwrite,
                                       const worker::MeasurementPolicy& measurement, int count);

  /// Remembers `digest` as the digest of correct outputs for inputs (seed, distribution) of
  /// `workload`, verified elsewhere (the gate compared them). Thread-safe.
  void add_verified(const std::string& workload, uint64_t seed, const std::string& distribution,
                    uint64_t digest);

  /// The digests verified so far for inputs of `workload`, to send with a request. Thread-safe.
  std::vector<worker::VerifiedDigest> verified(const Workload& workload);

  /// Compares the outputs of every checked call of `result` (written in request.check_path)
  /// with the oracle's expected outputs of the same inputs; the digests of those that pass are
  /// remembered. Returns "" or the failure, naming the call, the rung and the output. The
  /// expected outputs must be in the oracle's cache already (Evaluator primes them), except in
  /// single-threaded use. Throws Error when the result is inconsistent with the request (a
  /// check missing, an unknown digest claimed verified).
  std::string verify(const worker::TimeRequest& request, const worker::TimeResult& result,
                     const std::string& rung);

 private:
  static std::string key(const std::string& workload, uint64_t seed,
                         const std::string& distribution);

  const Task& task_;
  ReferenceOracle& oracle_;
  uint64_t secret_;
  std::atomic<uint64_t> requests_{0};
  std::mutex mutex_;
  std::map<std::string, std::set<uint64_t>> verified_;  // by key(): digests of correct outputs
};

}  // namespace kforge::evaluation

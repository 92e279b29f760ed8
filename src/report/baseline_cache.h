// The cache of per-device baseline times (issue 18, "Baselines"): what the reference as given
// (PyTorch eager) and torch.compile of it took for one problem, workload, device and PyTorch
// version, with the samples, the compile time, and compile's paired ratio to eager.
//
// Where: `baselines.sqlite` in the artifact cache folder (--cache-dir, default
// ~/.cache/kforge/artifacts), not in the memory: these are measurements of a device, valid only
// for one PyTorch, that can be thrown away and measured again at any time; the memory holds
// experience (what worked, with provenance) that a user exports and imports across machines.
// Beside the artifacts they share the cache's lifetime (`rm -rf` resets both) and every run on
// the machine that shares the artifact cache shares it, suite children included (WAL, busy
// timeout, one transaction per write).
//
// Read only where re-measuring buys nothing (cli/optimize_baseline.h): a compile that failed for
// this key is not tried again, and a compile-vs-eager ratio replaces compiling the module again;
// the eager reference is always timed interleaved with the best (never read from here).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/baseline.h"
#include "evaluation/statistics.h"

namespace kforge::report {

/// What a baseline time depends on. Two runs with the same key time the same module on the
/// same inputs' shapes with the same PyTorch on the same kind of device.
struct BaselineKey {
  std::string problem_sha256;  // the problem file's bytes (the derived task's problem_sha256)
  std::string dims;            // the timed workload's dims as compact JSON, keys sorted
  std::string backend;         // "cpu" | "cuda"
  std::string device;          // DeviceInfo::name ("NVIDIA H200", the CPU model)
  std::string torch_version;   // the torch worker's DeviceInfo::runtime_version ("torch 2.11.0")
  BaselineKind kind = BaselineKind::eager;
  /// "eager of <sha[:12]> <dims> on <device> (<torch>)", for messages.
  std::string describe() const;
};

/// One cached baseline.
struct BaselineEntry {
  bool ok = true;                  // false: it could not be measured (compile failed); see message
  std::string message;
  double median_ms = 0.0;          // rung-3 median of this baseline
  std::vector<double> samples_ms;  // rung-3 samples (all rounds)
  double compile_s = 0.0;          // kind compile: torch.compile plus the first call
  /// Kind compile: eager / compile, paired over the rounds of the run that measured it, and the
  /// eager median beside it (a later run compares its own, to see whether the device changed).
  std::optional<evaluation::SpeedupEstimate> over_eager;
  double eager_median_ms = 0.0;
  std::string measured_at;         // UTC, ISO 8601
  std::string run_dir;             // the run that measured it
  std::string kforge_version;
};

/// The cache file. Each call is one statement; safe to share between processes.
class BaselineCache {
 public:
  /// Opens `file`, creating it (and its folder) when absent. Throws Error naming the file when
  /// it is not a baseline cache or is newer than this kforge reads.
  static std::unique_ptr<BaselineCache> open(const std::filesystem::path& file);
  /// The file in cache folder `cache_dir`: `cache_dir`/baselines.sqlite.
  static std::filesystem::path file_in(const std::filesystem::path& cache_dir);
  ~BaselineCache();

  /// The entry of `key`, if one was stored.
  std::optional<BaselineEntry> find(const BaselineKey& key);
  /// Stores `entry` under `key`, replacing what was there.
  void store(const BaselineKey& key, const BaselineEntry& entry);

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Impl;
  explicit BaselineCache(std::filesystem::path path);
  std::filesystem::path path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::report

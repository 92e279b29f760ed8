// `kforge verify RUN_DIR`: re-checks a finished run's claim where it is run now. From what the
// run carries (RUN_DIR/bundle/: the task and copies of its references; best.cpp / best.cu; the
// recorded result.json), it rebuilds the best kernel, gates it again on fresh seeds (inputs
// the run never saw), times it against the reference in the final rung's interleaved rounds,
// and sets the new speedup beside the recorded one with a verdict: reproduced (the two
// confidence intervals overlap), faster here or slower here (they do not; which one), or
// failed (the best is not correct here, with why). Nothing is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/eval_command.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kforge::cli {

struct VerifyCommandOptions {
  std::string run_dir;
  std::string backend;           // "" = the run's own backend
  std::optional<uint64_t> seed;  // the gate's base seed; default: a fresh random one
  bool json = false;
  /// How the best is built and measured (device, final rounds, profile, cuda arch, cache);
  /// its task, kernel and backend are the run's. Profiling is off unless asked for.
  EvalCommandOptions measurement;
};

/// The run's claim as result.json records it.
struct RecordedClaim {
  std::string task;
  std::string best;             // the best candidate's id
  std::string backend;
  std::string device;           // the device's name
  std::string toolchain;
  std::string finished;         // run.json "started" (the run's date)
  double speedup = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
  double level = 0.95;
  double reference_median_ms = 0.0;
  double best_median_ms = 0.0;
};

/// What verify found.
struct Verification {
  std::string run_dir;
  RecordedClaim recorded;
  uint64_t seed = 0;            // the gate's base seed used here
  KernelEvaluation here;
  /// "reproduced", "faster_here", "slower_here" or "failed".
  std::string verdict;
  std::string explanation;      // one sentence with the numbers
};

/// Reads RUN_DIR's claim. Throws Error naming RUN_DIR and what is wrong: not a run (no
/// run.json), made by a newer kforge, unfinished (no result.json), without a best (nothing to
/// verify), or its final timing skipped.
RecordedClaim read_claim(const std::string& run_dir);

/// The verdict of `here` against `recorded` (see the file comment), with its explanation.
std::pair<std::string, std::string> judge_verification(const RecordedClaim& recorded,
                                                        const KernelEvaluation& here);

void add_verify_command(CLI::App& app, VerifyCommandOptions& options);

/// Runs `kforge verify`: exit 0 when reproduced or faster here, 3 (ExitCode::not_all_correct)
/// when slower here or failed; throws Error for a run directory it cannot verify.
int run_verify_command(const VerifyCommandOptions& options);

nlohmann::json to_json(const Verification& verification);
std::string render_verification(const Verification& verification);

}  // namespace kforge::cli

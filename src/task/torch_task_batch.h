// Deriving many PyTorch problem files with one import of torch (docs/torch_tasks.md, "Many
// problems at once").
//
// Importing PyTorch costs seconds per Python process (PyTorch 2.11 on the H200 machine: 1.9 s
// from kforge's bytecode folder, 4.8-6.8 s without it), more than deriving most problems. A suite therefore derives all of its problems in
// one `python3 -m kforge_torch derive --batch` process, which imports torch once and derives
// each problem in a child forked from it (its own state, a per-problem time limit).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kforge {

/// The outcome of one problem of a batch derivation.
struct DerivedProblem {
  std::string path;                       // the problem file, absolute and lexically normal
  std::optional<nlohmann::json> derived;  // the derived task (task_from_derived reads it)
  std::string error;                      // when not derived: why, naming the file
  double seconds = 0.0;                   // wall time of its derivation, fork to result
};

struct BatchDeriveOptions {
  /// The Python that runs the batch; empty: torch_python() (tests give a stand-in).
  std::string python;
  /// A problem whose derivation runs longer is stopped; its error says so (> 0).
  double per_problem_timeout_s = 300.0;
  /// Called with each problem's index and outcome as it arrives, in order (progress lines).
  std::function<void(size_t, const DerivedProblem&)> on_result;
  /// Polled about once a second; true stops the batch (the rest are errors "stopped").
  std::function<bool()> should_stop;
};

/// Derives every problem of `paths` (.py files; derived on the host, no capacity check, as
/// derive_torch_task does) in one Python process and returns one DerivedProblem per path, in
/// order. A problem that cannot be derived, hangs past the limit or crashes its child is its
/// own error; when the batch process itself dies, is stopped or runs past its overall deadline
/// (startup plus each problem's limit), every problem without a result gets that as its error.
/// Throws Error only when no Python with torch is found (torch_python()) or the batch answers
/// for another file than the one it was given next (a bug of the derivation, not of a problem).
std::vector<DerivedProblem> derive_torch_tasks(const std::vector<std::string>& paths,
                                               const BatchDeriveOptions& options = {});

}  // namespace kforge

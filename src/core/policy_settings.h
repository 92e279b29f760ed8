// The source policy settings of a task (its `[policy]` table, task_loader.h): which categories of
// the static source screen apply (evaluation/source_policy.h checks them) and the task's own
// forbidden patterns. Part of the task model, so it sits in core with it.
#pragma once

#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace kforge {

/// What a rule protects. The first seven can be switched off per task (`allow`); source_size and
/// task_pattern come from the task itself, and harness_tampering and reference_call (Python
/// candidates, evaluation/python_policy.h) protect the measurement itself: those always apply.
enum class PolicyCategory {
  library_compute,        // calls a vendor library (cuBLAS, cuDNN, CUTLASS, Thrust, ATen, ...)
  thread_creation,        // starts threads or processes (OpenMP pragmas are allowed)
  stream_creation,        // makes its own streams, graphs, host callbacks or timing events
  default_stream_launch,  // work on the default stream or device-wide synchronization (cuda)
  l2_persistence,         // sets an L2 access-policy window or persisting-L2 limit
  file_and_environment,   // files, devices, /proc, environment, dynamic loading, sockets
  process_control,        // exits, aborts, signals, non-local jumps, raw system calls
  source_size,            // the source is larger than SourcePolicy::max_source_bytes
  task_pattern,           // matches one of the task's own forbidden patterns
  harness_tampering,      // (Python) reassigns clocks, synchronize or torch; inspects the harness
  reference_call,         // (Python) calls the task's reference Model or imports the problem
};

std::string to_string(PolicyCategory category);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
PolicyCategory parse_policy_category(const std::string& name);

/// The categories a task may switch off with `allow`, in declaration order.
const std::vector<PolicyCategory>& switchable_policy_categories();

/// What to check. Defaults: every switchable category on, no extra patterns, 256 KiB.
struct SourcePolicy {
  std::set<PolicyCategory> enabled{switchable_policy_categories().begin(),
                                   switchable_policy_categories().end()};
  // ECMAScript regular expressions given by the task (e.g. the reference's function name, so a
  // candidate cannot call the reference), matched like the built-in rules: on the source without
  // comments, each whitespace run collapsed to one character. Repetition must be bounded
  // ({0,N}, not * or +): libstdc++ matches by recursion, one level per character.
  std::vector<std::string> extra_forbidden;
  // Larger sources are rejected unscanned. 256 KiB is ~17x the largest kernel in kernels/ (15 KB)
  // and bounds the time spent matching an untrusted text.
  int64_t max_source_bytes = 262144;
};

/// Compiles a task pattern (an ECMAScript regex of `[policy] forbid`). Throws Error, with a
/// message that names the pattern but not the field, when it repeats without bound (`*`, `+`,
/// `{n,}`: libstdc++ matches by recursion, one level per character, so an unbounded repeat over a
/// long line of untrusted source overflows the stack), does not compile, or matches "".
std::regex compile_task_pattern(const std::string& pattern);

}  // namespace kforge

// Static policy checks on a candidate kernel's source text, run before it is compiled.
//
// A candidate must do its own arithmetic, on the stream kforge hands it, without reaching outside
// its call (files, environment, other processes) or changing what the timing measures (streams,
// events, L2 persistence). These checks reject the obvious ways of breaking those rules early and
// with a message the generator can act on; the candidate's verdict is then rejected_by_policy.
//
// The check is a screen, not a proof. It matches regular expressions on the source with comments
// removed (string literals kept, so "/proc/self" in a string is found) and line splices undone,
// so it cannot see through the preprocessor or follow values: token pasting, macros defined on
// the command line, a stream variable that holds 0, or cudaLaunchKernel with a null stream all
// escape it. The worker's runtime checks (inputs
// unchanged, outputs poisoned, the timing on args->stream) stay the authority.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace kforge::evaluation {

/// What a rule protects. The first seven can be switched off per task (`allow`); source_size and
/// task_pattern come from the task itself and always apply.
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

/// Reads the optional `[policy]` table of a task file (`table` may be null: defaults):
///   allow = ["library_compute", ...]   switches those categories off
///   forbid = ["regex", ...]            adds task patterns (each must compile, repeat only a
///                                      bounded number of times, and not match the empty string)
///   max_source_bytes = N               a positive integer
/// Throws Error "<where>: policy.<field>: <what was expected>" on a wrong type, an unknown
/// category, a bad pattern or an unknown key.
SourcePolicy parse_source_policy(const toml::table* table, const std::string& where);

/// One rule broken at one place of the source.
struct PolicyViolation {
  PolicyCategory category = PolicyCategory::library_compute;
  int line = 0;         // 1-based line of the original source
  int column = 0;       // 1-based byte column in that line
  std::string rule;     // why it is forbidden and what to do instead
  std::string excerpt;  // the source line, trimmed, at most ~100 printable ASCII characters
};

/// Enough for the generator to fix every kind of problem; more only repeats them.
inline constexpr size_t kMaxReportedViolations = 100;

/// Checks `source` (the text of one translation unit) for `backend` ("cpu" or "cuda";
/// default_stream_launch only applies to cuda). Returns the violations ordered by line and
/// column, at most one per (line, category) and at most kMaxReportedViolations in all; empty
/// means the source passes. A source over max_source_bytes gives exactly one source_size
/// violation at 1:1. Throws Error on an unknown backend or an extra pattern that does not compile.
std::vector<PolicyViolation> check_source(const SourcePolicy& policy, std::string_view source,
                                          std::string_view backend);

/// One line per violation, "<source_name>:<line>:<column>: [<category>] <rule>: <excerpt>",
/// each ending in '\n'; "" for no violations.
std::string format_violations(const std::vector<PolicyViolation>& violations,
                              const std::string& source_name);

}  // namespace kforge::evaluation

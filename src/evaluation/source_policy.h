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

#include "core/policy_settings.h"

namespace kforge::evaluation {

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

/// Checks `source` (the text of one translation unit) for `backend` (a name of
/// backends/backend.h; the categories its table leaves unscreened do not apply, e.g.
/// default_stream_launch on cpu). Returns the violations ordered by line and
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

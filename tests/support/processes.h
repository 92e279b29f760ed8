// Looking at other processes from the tests (Linux /proc): whether one still runs, and which
// run a given command.
#pragma once

#include <string>
#include <vector>

namespace kforge::testing {

/// True while `pid` exists and is not a zombie (a dead child nobody reaped yet counts as gone).
bool alive(int pid);

/// Waits up to `seconds` for `pid` to be gone (see alive); false when it still runs then.
bool gone_within(int pid, double seconds);

/// Ids of the processes whose command line (/proc/PID/cmdline) contains both `a` and `b`.
std::vector<int> processes_with(const std::string& a, const std::string& b);

}  // namespace kforge::testing

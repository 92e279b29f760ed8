// Runs one test of this test binary again in a child process whose initial environment block
// holds extra variables, as if they had been exported before kforge started. setenv cannot do
// that in-process: /proc/PID/environ shows the block the kernel copied at exec, not `environ`.
//
//   TEST(Suite, Name) {
//     if (!testing::in_rerun()) {
//       const auto child = testing::rerun_this_test({"SECRET=..."}, 120);
//       EXPECT_TRUE(child.passed) << child.output;
//       return;
//     }
//     ... the checks, with SECRET in /proc/self/environ ...
//   }
#pragma once

#include <string>
#include <vector>

namespace kforge::testing {

struct RerunResult {
  bool passed = false;  // the child exited 0: its gtest run passed (or skipped)
  std::string output;   // its stdout and stderr interleaved
};

/// True inside a child started by rerun_this_test (KFORGE_TEST_RERUN names the running test).
bool in_rerun();

/// Runs the current test (gtest's current_test_info) alone in a fresh copy of this binary, with
/// `extra_environment` ("NAME=value") added to this process's environment, and waits at most
/// `timeout_s` seconds (then it is killed and passed is false). Throws Error when the binary
/// cannot be started or no test is running.
RerunResult rerun_this_test(const std::vector<std::string>& extra_environment, double timeout_s);

}  // namespace kforge::testing

#include "executor/child.h"

#include <gtest/gtest.h>

#include <csignal>

namespace kforge::executor {
namespace {

// A suite's rows say what stopped it: a SIGTERM (a scheduler, `kill`) is not a Ctrl-C.
TEST(SuiteStopSignal, TheRowsNameTheSignalThatStoppedTheSuite) {
  {
    StopSignalGuard guard;
    EXPECT_FALSE(suite_stopped());
    EXPECT_EQ(suite_stop_cause(), "a stop request");
    ASSERT_EQ(std::raise(SIGTERM), 0);
    EXPECT_TRUE(suite_stopped());
    EXPECT_EQ(suite_stop_cause(), "SIGTERM");
  }
  StopSignalGuard guard;  // a new suite starts unstopped
  EXPECT_FALSE(suite_stopped());
  ASSERT_EQ(std::raise(SIGINT), 0);
  EXPECT_EQ(suite_stop_cause(), "Ctrl-C");
}

TEST(SuiteChildError, LastKforgeErrorWinsOverLaterLines) {
  const std::deque<std::string> tail = {"compiling", "kforge: error: first", "note",
                                        "kforge: error: task.toml: bad dtype 'f33'", "bye"};
  EXPECT_EQ(last_error_line(tail), "task.toml: bad dtype 'f33'");
}

TEST(SuiteChildError, AnErrorThatListsItsReasonsBelowNamesThemInOneLine) {
  const std::deque<std::string> tail = {
      "kforge: error: p.toml: no built-in kernel family computes what this module computes; "
      "families tried:",
      "  gelu: forward takes 2 tensors; the family takes 1 (x ['rows', 'cols'])",
      "  gemv: no mapping of the module's tensors fits", "  softmax: forward takes 2 tensors"};
  EXPECT_EQ(last_error_line(tail),
            "p.toml: no built-in kernel family computes what this module computes; families "
            "tried: gelu, gemv, softmax (why each did not fit: the log)");
}

TEST(SuiteChildError, WithoutAnErrorLineTheLastNonEmptyLineIsTheReason) {
  EXPECT_EQ(last_error_line({"Segmentation fault", "", ""}), "Segmentation fault");
  EXPECT_EQ(last_error_line({}), "");
  // A trailing colon with nothing listed below stays as it is.
  EXPECT_EQ(last_error_line({"kforge: error: reasons:"}), "reasons:");
}

}  // namespace
}  // namespace kforge::executor

#include "executor/child.h"

#include <gtest/gtest.h>

namespace kforge::executor {
namespace {

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

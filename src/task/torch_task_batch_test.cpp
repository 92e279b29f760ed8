#include "task/torch_task_batch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// The batch's reading side against a stand-in for `python3 -m kforge_torch derive --batch`: a
// shell script that answers as the real one does, then misbehaves as each test asks.
class TorchTaskBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_torch_batch_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* name : {"a.py", "b.py", "c.py"}) {
      std::ofstream(dir_ / name) << "class Model: pass\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in Python whose stdout is `lines` ({A}, {B}: the absolute paths of a.py, b.py),
  // then which writes `last_words` to stderr and exits with `code`.
  std::string python(const std::string& lines, const std::string& last_words, int code) {
    const fs::path script = dir_ / "python";
    std::ofstream(script) << "#!/bin/sh\nA=" << path("a.py") << "\nB=" << path("b.py")
                          << "\ncat <<END\n" << lines << "END\necho '" << last_words
                          << "' >&2\nexit " << code << "\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(TorchTaskBatchTest, EachLineIsItsProblemsOutcomeAndTheRestSayWhyTheBatchEnded) {
  BatchDeriveOptions options;
  options.python = python(
      "{\"file\": \"$A\", \"ok\": true, \"task\": {\"name\": \"a\"}, \"seconds\": 1.5}\n"
      "{\"file\": \"$B\", \"ok\": false, \"error\": \"$B: line 3: syntax error\", \"seconds\": 0.1}\n",
      "Segmentation fault in the batch", 3);
  std::vector<size_t> seen;
  options.on_result = [&](size_t index, const DerivedProblem&) { seen.push_back(index); };
  const std::vector<DerivedProblem> results =
      derive_torch_tasks({path("a.py"), path("b.py"), path("c.py")}, options);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2}));
  ASSERT_TRUE(results[0].derived.has_value()) << results[0].error;
  EXPECT_EQ((*results[0].derived)["name"], "a");
  EXPECT_DOUBLE_EQ(results[0].seconds, 1.5);
  EXPECT_FALSE(results[1].derived.has_value());
  EXPECT_EQ(results[1].error, path("b.py") + ": line 3: syntax error");
  EXPECT_FALSE(results[2].derived.has_value());
  EXPECT_EQ(results[2].error, path("c.py") + ": the batch derivation ended before this problem "
                                             "(exit code 3: Segmentation fault in the batch)");
}

TEST_F(TorchTaskBatchTest, StopRequestEndsTheBatchAndNamesEveryProblemLeft) {
  BatchDeriveOptions options;
  options.python = python("", "", 0);
  options.should_stop = [] { return true; };
  const std::vector<DerivedProblem> results = derive_torch_tasks({path("a.py")}, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error, path("a.py") + ": stopped before this problem was derived");
}

TEST_F(TorchTaskBatchTest, AnswerForAnotherFileIsABugOfTheDerivation) {
  BatchDeriveOptions options;
  options.python = python("{\"file\": \"$B\", \"ok\": false, \"error\": \"x\"}\n", "", 0);
  EXPECT_THROW(derive_torch_tasks({path("a.py")}, options), Error);
}

TEST_F(TorchTaskBatchTest, LineThatIsNotJsonIsThatProblemsError) {
  BatchDeriveOptions options;
  options.python = python("not json\n", "", 0);
  const std::vector<DerivedProblem> results = derive_torch_tasks({path("a.py")}, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("printed no valid JSON"), std::string::npos) << results[0].error;
}

TEST_F(TorchTaskBatchTest, TimeoutMustBePositive) {
  BatchDeriveOptions options;
  options.per_problem_timeout_s = 0.0;
  EXPECT_THROW(derive_torch_tasks({path("a.py")}, options), Error);
}

}  // namespace
}  // namespace kforge

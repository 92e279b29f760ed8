#include "cli/suite_tasks.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;

class SuiteTasksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests of this fixture in parallel processes.
    dir_ = fs::temp_directory_path() /
           ("kforge_suite_tasks_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path touch(const fs::path& relative) {
    fs::path path = dir_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "name = \"x\"\n";
    return path;
  }

  static std::vector<std::string> labels(const std::vector<SuiteTask>& tasks) {
    std::vector<std::string> out;
    for (const SuiteTask& t : tasks) out.push_back(t.label);
    return out;
  }

  fs::path dir_;
};

TEST_F(SuiteTasksTest, FindsEveryTaskBelowAFolderSorted) {
  touch("tasks/softmax/task.toml");
  touch("tasks/gemv/task.toml");
  touch("tasks/level2/fused/task.toml");
  touch("tasks/rmsnorm/reference.cpp");  // not a task
  std::vector<SuiteTask> tasks = discover_suite_tasks({(dir_ / "tasks").string()});
  EXPECT_EQ(labels(tasks), (std::vector<std::string>{"gemv", "level2-fused", "softmax"}));
  EXPECT_TRUE(tasks[0].task_path.is_absolute());
  EXPECT_EQ(tasks[0].task_path, dir_ / "tasks/gemv/task.toml");
}

TEST_F(SuiteTasksTest, SkipsRunDirectoriesThatHoldACopyOfTheirTask) {
  touch("tasks/softmax/task.toml");
  touch("tasks/suite/softmax/task.toml");  // a run directory of an earlier suite
  touch("tasks/suite/softmax/run.json");
  EXPECT_EQ(labels(discover_suite_tasks({(dir_ / "tasks").string()})),
            std::vector<std::string>{"softmax"});
}

TEST_F(SuiteTasksTest, TaskFilesAreTakenAsGivenAndRepeatsGetUniqueLabels) {
  fs::path a = touch("a/gemv/task.toml");
  fs::path b = touch("b/gemv/task.toml");
  fs::path odd = touch("c/my_task.toml");
  std::vector<SuiteTask> tasks =
      discover_suite_tasks({a.string(), b.string(), odd.string(), a.string()});
  EXPECT_EQ(labels(tasks), (std::vector<std::string>{"gemv", "gemv-2", "my_task"}));
}

TEST_F(SuiteTasksTest, TaskDirectlyInTheFolderIsNamedAfterTheFolder) {
  touch("rmsnorm/task.toml");
  EXPECT_EQ(labels(discover_suite_tasks({(dir_ / "rmsnorm").string() + "/"})),
            std::vector<std::string>{"rmsnorm"});
}

TEST_F(SuiteTasksTest, FolderWithoutTasksIsAClearError) {
  fs::create_directories(dir_ / "empty/sub");
  try {
    discover_suite_tasks({(dir_ / "empty").string()});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no task.toml or PyTorch problem file below this folder"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(discover_suite_tasks({(dir_ / "missing").string()}), Error);
  EXPECT_THROW(discover_suite_tasks({}), Error);
}

TEST_F(SuiteTasksTest, FolderGivesPyTorchProblemFilesButNotOtherPythonFiles) {
  fs::create_directories(dir_ / "level1");
  std::ofstream(dir_ / "level1" / "3_Softmax.py")
      << "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n";
  std::ofstream(dir_ / "level1" / "helpers.py") << "def helper():\n    return 1\n";
  std::ofstream(dir_ / "level1" / "__init__.py") << "";
  touch("rmsnorm/task.toml");
  const std::vector<SuiteTask> tasks = discover_suite_tasks({dir_.string()});
  EXPECT_EQ(labels(tasks), (std::vector<std::string>{"level1-3_Softmax", "rmsnorm"}));
  EXPECT_EQ(tasks[0].task_path.filename(), "3_Softmax.py");
}

}  // namespace
}  // namespace kforge::cli

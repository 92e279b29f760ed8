#include "report/run_directory.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge::report {
namespace {
namespace fs = std::filesystem;

class RunDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests of this fixture in parallel.
    base_ = fs::temp_directory_path() /
            ("kforge_rundir_test_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(base_);
    fs::create_directories(base_);
    previous_ = fs::current_path();
    fs::current_path(base_);
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(base_);
  }
  fs::path base_, previous_;
};

// The default run directory is relative (runs/<task>-<time>): writing into a candidate folder
// must land once under it, not under runs/.../runs/....
TEST_F(RunDirectoryTest, RelativePathWritesLandInsideTheRun) {
  RunDirectory run(fs::path("runs") / "task-1");
  EXPECT_TRUE(run.path().is_absolute());
  fs::path candidate = run.candidate_dir(0, "row_simd[A=1]");
  run.write_text(candidate / "source.cpp", "int x;\n");
  run.write_json("result.json", {{"ok", true}});
  run.append_event({{"event", "test"}});
  EXPECT_TRUE(fs::exists(base_ / "runs" / "task-1" / "candidates" / "000-row_simd_A_1_" / "source.cpp"));
  EXPECT_TRUE(fs::exists(base_ / "runs" / "task-1" / "result.json"));
  EXPECT_FALSE(fs::exists(base_ / "runs" / "task-1" / "runs"));
}

TEST_F(RunDirectoryTest, NonEmptyDirectoryIsRefused) {
  fs::create_directories("taken");
  std::ofstream("taken/file") << "x";
  EXPECT_THROW(RunDirectory(fs::path("taken")), Error);
}

TEST_F(RunDirectoryTest, DefaultPathsAreUnique) {
  fs::path first = RunDirectory::default_path("runs", "t");
  fs::create_directories(first);
  EXPECT_NE(RunDirectory::default_path("runs", "t"), first);
}

}  // namespace
}  // namespace kforge::report

#include "task/task_bundle.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "task/task_loader.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class TaskBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / "kforge_task_bundle_test";
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TaskBundleTest, ANativeTaskLoadsBackFromItsMovedBundleAsTheSameTask) {
  const Task original = load_task(std::string(KFORGE_SOURCE_DIR) + "/tests/data/softmax_small/task.toml");
  const fs::path toml = write_task_bundle(original, dir_ / "bundle");
  EXPECT_TRUE(fs::exists(dir_ / "bundle" / "reference.cpp"));
  // Moved elsewhere, as to another machine: its references are the copies beside it.
  fs::rename(dir_ / "bundle", dir_ / "moved");
  const Task bundled = load_task((dir_ / "moved" / "task.toml").string());
  EXPECT_EQ(bundled.name, original.name);
  EXPECT_EQ(bundled.family, original.family);
  EXPECT_EQ(nlohmann::json(bundled.signature), nlohmann::json(original.signature));
  EXPECT_EQ(nlohmann::json(bundled.workloads), nlohmann::json(original.workloads));
  EXPECT_EQ(nlohmann::json(bundled.tolerance), nlohmann::json(original.tolerance));
  ASSERT_EQ(bundled.reference_paths.size(), original.reference_paths.size());
  for (const auto& [backend, path] : bundled.reference_paths) {
    EXPECT_EQ(fs::path(path).parent_path(), dir_ / "moved") << backend;
    std::ifstream a(path), b(original.reference_paths.at(backend));
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}),
              std::string(std::istreambuf_iterator<char>(b), {}))
        << backend;
  }
  (void)toml;
}

}  // namespace
}  // namespace kforge

#include "report/baseline_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "memory/sqlite_statement.h"

namespace kforge::report {
namespace {
namespace fs = std::filesystem;

class BaselineCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_baseline_cache_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static BaselineKey key() {
    BaselineKey k;
    k.problem_sha256 = std::string(64, 'a');
    k.dims = R"({"cols":393216,"rows":4096})";
    k.backend = "cuda";
    k.device = "NVIDIA H200";
    k.torch_version = "torch 2.11.0";
    k.kind = BaselineKind::compile;
    return k;
  }
  static BaselineEntry entry() {
    BaselineEntry e;
    e.median_ms = 0.8;
    e.samples_ms = {0.81, 0.8, 0.79};
    e.compile_s = 23.5;
    e.over_eager = evaluation::SpeedupEstimate{1.5, 1.4, 1.6, 0.95};
    e.eager_median_ms = 1.2;
    e.measured_at = "2025-06-01T10:00:00Z";
    e.run_dir = "/runs/a";
    e.kforge_version = "0.1.0";
    return e;
  }

  fs::path dir_;
};

TEST_F(BaselineCacheTest, StoresAndFindsAnEntryUnderItsWholeKey) {
  const fs::path file = BaselineCache::file_in(dir_ / "artifacts");
  EXPECT_EQ(file, dir_ / "artifacts" / "baselines.sqlite");
  auto cache = BaselineCache::open(file);  // makes its folder
  EXPECT_FALSE(cache->find(key()));
  cache->store(key(), entry());
  // Another process (a suite's next child) reads it.
  const std::optional<BaselineEntry> found = BaselineCache::open(file)->find(key());
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->ok);
  EXPECT_EQ(found->samples_ms, entry().samples_ms);
  EXPECT_DOUBLE_EQ(found->compile_s, 23.5);
  ASSERT_TRUE(found->over_eager);
  EXPECT_DOUBLE_EQ(found->over_eager->ci_high, 1.6);
  EXPECT_DOUBLE_EQ(found->eager_median_ms, 1.2);
  EXPECT_EQ(found->measured_at, "2025-06-01T10:00:00Z");
  EXPECT_EQ(found->run_dir, "/runs/a");
  // Any part of the key that differs misses: another problem file, shape, device, PyTorch or
  // kind of baseline.
  for (int part = 0; part < 6; ++part) {
    BaselineKey other = key();
    if (part == 0) other.problem_sha256[0] = 'b';
    if (part == 1) other.dims = R"({"cols":1024,"rows":4096})";
    if (part == 2) other.backend = "cpu";
    if (part == 3) other.device = "NVIDIA A100-SXM4-80GB";
    if (part == 4) other.torch_version = "torch 2.10.0";
    if (part == 5) other.kind = BaselineKind::eager;
    EXPECT_FALSE(cache->find(other)) << other.describe();
  }
}

TEST_F(BaselineCacheTest, AFailureIsStoredAndAStoreReplaces) {
  auto cache = BaselineCache::open(BaselineCache::file_in(dir_));
  BaselineEntry failed;
  failed.ok = false;
  failed.message = "runtime_error: torch.compile of p.py failed: no lowering";
  failed.measured_at = "2025-06-01T10:00:00Z";
  cache->store(key(), failed);
  std::optional<BaselineEntry> found = cache->find(key());
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->ok);
  EXPECT_EQ(found->message, failed.message);
  EXPECT_FALSE(found->over_eager);
  cache->store(key(), entry());
  found = cache->find(key());
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->ok);
}

TEST_F(BaselineCacheTest, RefusesAFileThatIsNotABaselineCacheOrIsNewer) {
  fs::create_directories(dir_);
  {
    memory::sqlite::Database other((dir_ / "other.sqlite").string(), 1000);
    other.exec("CREATE TABLE notes (x TEXT)");
  }
  try {
    BaselineCache::open(dir_ / "other.sqlite");
    FAIL() << "opened a foreign SQLite file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "other.sqlite").string() + ": an SQLite file "
                                         "with other tables, not a kforge baseline cache"),
              std::string::npos)
        << e.what();
  }
  {
    memory::sqlite::Database newer((dir_ / "newer.sqlite").string(), 1000);
    newer.exec("PRAGMA user_version = 99");
  }
  EXPECT_THROW(BaselineCache::open(dir_ / "newer.sqlite"), Error);
}

}  // namespace
}  // namespace kforge::report

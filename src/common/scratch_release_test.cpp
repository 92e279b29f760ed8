#include "common/scratch_release.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kforge {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kforge_scratch_release_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string make_file(const fs::path& dir, const std::string& name, int bytes) {
  const std::string path = (dir / name).string();
  std::ofstream(path) << std::string(static_cast<size_t>(bytes), 'x');
  return path;
}

TEST(ScratchRelease, RemovesTheFilesAndDropsTheMappingByTheFlush) {
  const fs::path dir = fresh_dir("flush");
  ScratchRelease release;
  const std::string mapped = make_file(dir, "mapped.bin", 8192);
  MappedFile mapping(mapped, MappedFile::Mode::read);
  ASSERT_EQ(mapping.size(), 8192);
  release.release({mapped, make_file(dir, "other.bin", 10)}, std::move(mapping));
  EXPECT_EQ(mapping.size(), 0);  // moved into the queue
  release.release({(dir / "never-made.bin").string()});  // a missing file is fine
  release.flush();
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(ScratchRelease, TheDestructorFinishesWhatIsQueued) {
  const fs::path dir = fresh_dir("destructor");
  {
    ScratchRelease release(1);  // the second release waits for room
    for (int i = 0; i < 5; ++i) release.release({make_file(dir, std::to_string(i), 100)});
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(ScratchRelease, ReleaseLaterQueuesOnEveryWayOut) {
  const fs::path dir = fresh_dir("later");
  const auto early_return = [&](bool fail) {
    ReleaseLater later{make_file(dir, fail ? "failed.bin" : "passed.bin", 4096)};
    if (fail) return;
    later.mapping = MappedFile(later.paths.front(), MappedFile::Mode::read);
  };
  early_return(true);
  early_return(false);
  scratch_release().flush();
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace kforge

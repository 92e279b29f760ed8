#include "common/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/error.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

// A fresh folder for one test, removed first so that a rerun starts clean.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kforge_files_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(WriteFileAtomically, ReplacesAnExistingFile) {
  const fs::path dir = fresh_dir("replace");
  write_file_atomically(dir / "a.json", "old");
  write_file_atomically(dir / "a.json", "new");
  EXPECT_EQ(read_file(dir / "a.json"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// `kforge memory export FILE` with FILE a link (a dotfile kept in a repository, /dev/stdout):
// renaming over the link replaced the link by a regular file; as root, /dev/stdout itself.
TEST(WriteFileAtomically, FollowsASymbolicLinkAndKeepsIt) {
  const fs::path dir = fresh_dir("link");
  fs::create_directories(dir / "repo");
  write_file_atomically(dir / "repo" / "memory.json", "old");
  fs::create_symlink("repo/memory.json", dir / "memory.json");
  write_file_atomically(dir / "memory.json", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "memory.json"));
  EXPECT_EQ(read_file(dir / "repo" / "memory.json"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "repo"), fs::directory_iterator()), 1);
}

TEST(WriteFileAtomically, WritesADeviceInPlace) {
  const fs::path dir = fresh_dir("device");
  fs::create_symlink("/dev/null", dir / "sink");
  write_file_atomically(dir / "sink", "text");
  EXPECT_TRUE(fs::is_symlink(dir / "sink"));
  EXPECT_TRUE(fs::is_character_file(dir / "sink"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// `kforge memory export ""` said "cannot rename .tmpPID_N to : No such file or directory" and
// left the temporary file in the current folder.
TEST(WriteFileAtomically, RefusesAnEmptyNameAndLeavesNoTemporary) {
  const fs::path dir = fresh_dir("empty");
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  try {
    write_file_atomically("", "text");
    ADD_FAILURE() << "an empty name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty name"), std::string::npos) << e.what();
  }
  fs::current_path(before);
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace kforge

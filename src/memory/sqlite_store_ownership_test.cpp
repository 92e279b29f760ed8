#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {
namespace fs = std::filesystem;

// A --memory path that points at another program's database must be refused untouched.
TEST(SqliteStoreOwnership, ForeignDatabaseIsRefusedAndLeftAlone) {
  fs::path path = fs::temp_directory_path() / "kforge_foreign.sqlite";
  fs::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE contacts (name TEXT)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto size_before = fs::file_size(path);
  try {
    SqliteStore::open(path, "");
    FAIL() << "a foreign database was adopted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a kforge memory database"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("contacts"), std::string::npos);
  }
  EXPECT_EQ(fs::file_size(path), size_before);
  EXPECT_FALSE(fs::exists(path.string() + "-wal")) << "the file must not be switched to WAL";
  fs::remove(path);
}

// Another SQLite file that carries a schema version (a kforge run.sqlite given as --memory, say)
// is refused too, byte for byte unchanged: stamping the memory's application_id on it first
// would change a file the user never meant kforge to write.
TEST(SqliteStoreOwnership, VersionedForeignDatabaseIsRefusedByteForByte) {
  fs::path path = fs::temp_directory_path() / "kforge_run_as_memory.sqlite";
  fs::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE meta (key TEXT, value TEXT); CREATE TABLE candidates "
                         "(id TEXT); PRAGMA user_version = 1;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto read_all = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = read_all();
  try {
    SqliteStore::open(path, "");
    FAIL() << "a run database was adopted as a memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no kforge memory tables"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("candidates"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_all(), before);
  fs::remove(path);
}

TEST(SqliteStoreOwnership, GarbageFileIsRefused) {
  fs::path path = fs::temp_directory_path() / "kforge_garbage.sqlite";
  std::ofstream(path) << std::string(4096, 'x');
  EXPECT_THROW(SqliteStore::open(path, ""), Error);
  fs::remove(path);
}

TEST(SqliteStoreOwnership, KforgeDatabaseReopens) {
  fs::path path = fs::temp_directory_path() / "kforge_own.sqlite";
  fs::remove(path);
  SqliteStore::open(path, "");
  EXPECT_NO_THROW(SqliteStore::open(path, ""));
  fs::remove(path);
  fs::remove(path.string() + "-wal");
  fs::remove(path.string() + "-shm");
}

}  // namespace
}  // namespace kforge::memory

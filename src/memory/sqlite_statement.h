// Thin RAII wrappers over the SQLite C API, used only by sqlite_store.cpp. Every failing sqlite3_*
// call becomes a kforge::Error naming the call, the SQL, the database path and sqlite3_errmsg.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace kforge::memory::sqlite {

/// An open database connection. Not copyable; closes on destruction.
class Database {
 public:
  /// Opens (creating if absent) the database at `path` (":memory:" for a private in-memory one)
  /// with a busy timeout of `busy_timeout_ms` milliseconds. Throws Error on failure.
  Database(const std::string& path, int busy_timeout_ms);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  /// Runs one or more SQL statements that return no rows we need. Throws Error on failure.
  void exec(const std::string& sql);
  /// Rows changed by the most recent INSERT/UPDATE/DELETE on this connection.
  int64_t changes() const;

  /// Throws Error("<call>(<sql>) on <path>: <sqlite3_errmsg>").
  [[noreturn]] void fail(const std::string& call, const std::string& sql) const;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

/// One prepared statement. Parameters are 1-based (?1, ?2, ...); columns are 0-based.
class Statement {
 public:
  Statement(Database& db, std::string sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, const std::string& value);
  Statement& bind(int index, double value);
  Statement& bind(int index, int64_t value);
  /// Binds NULL when `value` is empty.
  Statement& bind(int index, const std::optional<double>& value);
  /// Binds NULL when `value` is the empty string.
  Statement& bind_text_or_null(int index, const std::string& value);

  /// Advances; returns true when a row is available, false when done. Throws Error on failure.
  bool step();
  /// Steps a statement that must return no row (INSERT/UPDATE/DDL).
  void run();

  std::string text(int column) const;  // "" for NULL
  double real(int column) const;
  int64_t integer(int column) const;
  bool is_null(int column) const;
  /// nullopt for NULL, else the column as a double.
  std::optional<double> optional_real(int column) const;

 private:
  void check_bind(int rc, int index);

  Database& db_;
  std::string sql_;
  sqlite3_stmt* statement_ = nullptr;
};

/// BEGIN IMMEDIATE ... COMMIT; rolls back on destruction unless committed. IMMEDIATE takes the
/// write lock up front so that two kforge processes never deadlock upgrading a read lock.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace kforge::memory::sqlite

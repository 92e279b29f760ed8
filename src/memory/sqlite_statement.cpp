#include "memory/sqlite_statement.h"

#include <sqlite3.h>

#include <utility>

#include "common/error.h"

namespace kforge::memory::sqlite {

Database::Database(const std::string& path, int busy_timeout_ms) : path_(path) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("sqlite3_open_v2 on " + path + ": " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
  if (sqlite3_busy_timeout(db_, busy_timeout_ms) != SQLITE_OK) fail("sqlite3_busy_timeout", "");
}

Database::~Database() { sqlite3_close(db_); }

void Database::exec(const std::string& sql) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    fail("sqlite3_exec", sql);
  }
}

int64_t Database::changes() const { return sqlite3_changes64(db_); }

void Database::fail(const std::string& call, const std::string& sql) const {
  std::string what = sql.empty() ? call : call + "(\"" + sql + "\")";
  throw Error(what + " on " + path_ + ": " + sqlite3_errmsg(db_));
}

Statement::Statement(Database& db, std::string sql) : db_(db), sql_(std::move(sql)) {
  if (sqlite3_prepare_v2(db_.handle(), sql_.c_str(), -1, &statement_, nullptr) != SQLITE_OK) {
    db_.fail("sqlite3_prepare_v2", sql_);
  }
}

Statement::~Statement() { sqlite3_finalize(statement_); }

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) db_.fail("sqlite3_bind (parameter " + std::to_string(index) + ")", sql_);
}

Statement& Statement::bind(int index, const std::string& value) {
  check_bind(sqlite3_bind_text(statement_, index, value.data(), static_cast<int>(value.size()),
                               SQLITE_TRANSIENT),
             index);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_bind(sqlite3_bind_double(statement_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(statement_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<double>& value) {
  if (value.has_value()) return bind(index, *value);
  check_bind(sqlite3_bind_null(statement_, index), index);
  return *this;
}

Statement& Statement::bind_text_or_null(int index, const std::string& value) {
  if (!value.empty()) return bind(index, value);
  check_bind(sqlite3_bind_null(statement_, index), index);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail("sqlite3_step", sql_);
}

void Statement::run() {
  if (step()) throw Error("sqlite3_step(\"" + sql_ + "\") on " + db_.path() + ": unexpected row");
}

std::string Statement::text(int column) const {
  const unsigned char* value = sqlite3_column_text(statement_, column);
  if (value == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(value),
                     static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
}

double Statement::real(int column) const { return sqlite3_column_double(statement_, column); }

int64_t Statement::integer(int column) const { return sqlite3_column_int64(statement_, column); }

bool Statement::is_null(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

std::optional<double> Statement::optional_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return real(column);
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  // A failed ROLLBACK can only mean the connection already rolled back; nothing more to undo.
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace kforge::memory::sqlite

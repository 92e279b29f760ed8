// Snapshots of a memory for a process that must work on its own file (a Slurm job of a suite),
// and the mark each snapshot carries: table snapshot_mark (evidence_id, run_id), one row, the
// highest evidence and run ids the snapshot holds. The table lives only in snapshots and is no
// part of the numbered schema (sqlite_schema.h): a kforge that does not know it opens the file
// as any memory, and merges it whole (SqliteStore::snapshot_mark() is nullopt for such a file).
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "memory/sqlite_statement.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

constexpr const char* kMarkTable = "snapshot_mark";

bool has_mark_table(sqlite::Database& db) {
  sqlite::Statement query(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  query.bind(1, std::string(kMarkTable));
  return query.step();
}

// Stores in the snapshot `db` where it ends, replacing a mark it inherited (a snapshot of a
// file that was itself a snapshot), in one transaction.
SqliteStore::Mark write_mark(sqlite::Database& db) {
  sqlite::Transaction transaction(db);
  db.exec(std::string("CREATE TABLE IF NOT EXISTS ") + kMarkTable +
          " (evidence_id INTEGER NOT NULL, run_id INTEGER NOT NULL);"
          "DELETE FROM " +
          kMarkTable +
          ";"
          "INSERT INTO " +
          kMarkTable +
          " SELECT (SELECT coalesce(max(id), 0) FROM evidence), "
          "(SELECT coalesce(max(id), 0) FROM runs);");
  sqlite::Statement read(db, std::string("SELECT evidence_id, run_id FROM ") + kMarkTable);
  read.step();
  const SqliteStore::Mark mark{read.integer(0), read.integer(1)};
  transaction.commit();
  return mark;
}

}  // namespace

SqliteStore::Mark SqliteStore::write_snapshot(const std::filesystem::path& target) {
  // VACUUM INTO refuses an existing file itself, but with a message that names neither file.
  if (std::filesystem::exists(target)) {
    throw Error("memory snapshot " + target.string() + ": already exists (expected a new file)");
  }
  return with_context("writing a snapshot of memory " + path_.string() + " to " + target.string(),
                      [&] {
                        {
                          sqlite::Statement copy(*db_, "VACUUM INTO ?1");
                          copy.bind(1, target.string());
                          copy.step();
                        }
                        // The mark is read from the copy itself, so it is where the copy ends even
                        // while other processes append to this memory.
                        sqlite::Database snapshot(target.string(), kDefaultBusyTimeoutMs);
                        return write_mark(snapshot);
                      });
}

std::optional<SqliteStore::Mark> SqliteStore::snapshot_mark() {
  if (!has_mark_table(*db_)) return std::nullopt;
  sqlite::Statement read(*db_, std::string("SELECT typeof(evidence_id), typeof(run_id), "
                                           "evidence_id, run_id FROM ") +
                                   kMarkTable);
  std::optional<Mark> mark;
  int rows = 0;
  while (read.step()) {
    ++rows;
    if (read.text(0) == "integer" && read.text(1) == "integer") {
      mark = Mark{read.integer(2), read.integer(3)};
    }
  }
  if (rows != 1 || !mark) {
    throw Error(path_.string() + ": table " + kMarkTable +
                ": expected one row of two integers (evidence_id, run_id), found " +
                std::to_string(rows) + " row(s)" + (rows == 1 ? " of other types" : "") +
                " (a snapshot kforge did not write?)");
  }
  return mark;
}

}  // namespace kforge::memory

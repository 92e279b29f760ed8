// Recorded runs in the memory (recorded_run.h; schema 3, sqlite_schema.h): SqliteStore's
// record_run, runs and check_writable.
#include <sqlite3.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "memory/sqlite_schema.h"
#include "memory/sqlite_statement.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

void check_finite(const std::optional<double>& value, const char* name) {
  if (value && !std::isfinite(*value)) {
    throw Error(std::string("candidate ") + name + " must be finite, got " +
                std::to_string(*value));
  }
}

void insert_candidate(sqlite::Database& db, int64_t run_id, int64_t position,
                      const RecordedCandidate& c) {
  for (const auto& [value, name] : {std::pair{c.median_ms, "median_ms"},
                                    std::pair{c.reference_median_ms, "reference_median_ms"},
                                    std::pair{c.speedup, "speedup"}, std::pair{c.ci_low, "ci_low"},
                                    std::pair{c.ci_high, "ci_high"}, std::pair{c.level, "level"}}) {
    check_finite(value, name);
  }
  sqlite::Statement insert(
      db,
      "INSERT INTO run_candidates (run_id, position, candidate_id, source_name, source, verdict, "
      "message, failed_at, median_ms, reference_median_ms, speedup, ci_low, ci_high, level) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  insert.bind(1, run_id).bind(2, position).bind(3, c.candidate_id).bind(4, c.source_name);
  insert.bind(5, c.source).bind(6, c.verdict).bind(7, c.message).bind(8, c.failed_at);
  insert.bind(9, c.median_ms).bind(10, c.reference_median_ms).bind(11, c.speedup);
  insert.bind(12, c.ci_low).bind(13, c.ci_high).bind(14, c.level).run();
}

std::vector<RecordedCandidate> candidates_of(sqlite::Database& db, int64_t run_id) {
  sqlite::Statement rows(db,
                         "SELECT candidate_id, source_name, source, verdict, message, failed_at, "
                         "median_ms, reference_median_ms, speedup, ci_low, ci_high, level FROM "
                         "run_candidates WHERE run_id = ?1 ORDER BY position");
  rows.bind(1, run_id);
  std::vector<RecordedCandidate> out;
  while (rows.step()) {
    RecordedCandidate c;
    c.candidate_id = rows.text(0);
    c.source_name = rows.text(1);
    c.source = rows.text(2);
    c.verdict = rows.text(3);
    c.message = rows.text(4);
    c.failed_at = rows.text(5);
    c.median_ms = rows.optional_real(6);
    c.reference_median_ms = rows.optional_real(7);
    c.speedup = rows.optional_real(8);
    c.ci_low = rows.optional_real(9);
    c.ci_high = rows.optional_real(10);
    c.level = rows.optional_real(11);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

int64_t SqliteStore::insert_run(const RecordedRun& run) {
  if (run.candidates.empty()) throw Error("a recorded run needs a candidate");
  const Provenance& p = run.provenance;
  sqlite::Statement insert(*db_,
                           "INSERT INTO runs (created_at, kind, task, command, backend, device, "
                           "compute_capability, toolchain, family, task_hash) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  insert.bind(1, run.created_at.empty() ? schema::now_utc_iso8601() : run.created_at);
  insert.bind(2, run.kind).bind(3, run.task).bind(4, run.command);
  insert.bind(5, p.backend).bind(6, p.device).bind(7, p.compute_capability);
  insert.bind(8, p.toolchain).bind(9, p.family).bind(10, p.task_hash).run();
  const int64_t id = sqlite3_last_insert_rowid(db_->handle());
  for (size_t i = 0; i < run.candidates.size(); ++i) {
    insert_candidate(*db_, id, static_cast<int64_t>(i), run.candidates[i]);
  }
  return id;
}

int64_t SqliteStore::record_run(const RecordedRun& run) {
  return with_context(
      "while recording a " + run.kind + " run of task '" + run.task + "' in " + path_.string(),
      [&] {
        sqlite::Transaction transaction(*db_);
        const int64_t id = insert_run(run);
        transaction.commit();
        return id;
      });
}

std::vector<RecordedRun> SqliteStore::runs(const std::string& task_hash) {
  return runs_after(task_hash, 0);
}

std::vector<RecordedRun> SqliteStore::runs_after(const std::string& task_hash, int64_t after_id) {
  sqlite::Statement rows(*db_,
                         "SELECT id, created_at, kind, task, command, backend, device, "
                         "compute_capability, toolchain, family, task_hash FROM runs "
                         "WHERE (?1 = '' OR task_hash = ?1) AND id > ?2 ORDER BY id");
  rows.bind(1, task_hash).bind(2, after_id);
  std::vector<RecordedRun> out;
  while (rows.step()) {
    RecordedRun run;
    run.id = rows.integer(0);
    run.created_at = rows.text(1);
    run.kind = rows.text(2);
    run.task = rows.text(3);
    run.command = rows.text(4);
    run.provenance = {rows.text(5), rows.text(6), rows.text(7),
                      rows.text(8), rows.text(9), rows.text(10)};
    out.push_back(std::move(run));
  }
  for (RecordedRun& run : out) run.candidates = candidates_of(*db_, run.id);
  return out;
}

void SqliteStore::check_writable() {
  if (sqlite3_db_readonly(db_->handle(), "main") == 1) {
    throw Error(path_.string() +
                ": the memory database is read-only (check the file's and its "
                "folder's permissions, or choose another --memory / KFORGE_MEMORY)");
  }
  with_context(path_.string() +
                   ": the memory database cannot be written (choose another "
                   "--memory / KFORGE_MEMORY)",
               [&] {
                 // IMMEDIATE takes the write lock (and creates the WAL files) without a change.
                 sqlite::Transaction probe(*db_);
               });
}

}  // namespace kforge::memory

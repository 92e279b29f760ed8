#include "executor/job_memory.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "memory/sqlite_store.h"

namespace kforge::executor {

void snapshot_memory(const std::filesystem::path& suite_memory,
                     const std::filesystem::path& seed_knowledge,
                     const std::filesystem::path& target) {
  std::unique_ptr<memory::SqliteStore> store =
      memory::SqliteStore::open(suite_memory, seed_knowledge);
  store->write_snapshot(target);
}

MemoryMerge merge_memory(const std::filesystem::path& job_memory,
                         const std::filesystem::path& suite_memory,
                         const std::filesystem::path& seed_knowledge) {
  if (!std::filesystem::exists(job_memory)) {
    throw Error("memory of a job " + job_memory.string() + ": does not exist");
  }
  // No seed for the job's file: it is a snapshot, seeded already; an empty graph stays empty.
  std::unique_ptr<memory::SqliteStore> job = memory::SqliteStore::open(job_memory, "");
  const std::optional<memory::SqliteStore::Mark> mark = job->snapshot_mark();
  nlohmann::json rows = job->export_json(mark.value_or(memory::SqliteStore::Mark{}));
  job.reset();
  std::unique_ptr<memory::SqliteStore> suite =
      memory::SqliteStore::open(suite_memory, seed_knowledge);
  memory::SqliteStore::ImportSummary summary = suite->import_json(rows, job_memory.string());
  return {summary.evidence_added, summary.evidence_skipped, summary.runs_added, mark.has_value()};
}

}  // namespace kforge::executor

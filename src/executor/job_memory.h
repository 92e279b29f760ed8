// The memory of a suite whose tasks run as Slurm jobs. SQLite over a network filesystem is not
// safe for concurrent writers, so no job writes the suite's memory: each starts from a snapshot
// (a copy made by the driver right before it submits the job) and writes its evidence there; the
// driver merges a finished job's file back (SqliteStore::import_json: evidence already present
// is skipped, statistics are recomputed), so later jobs start from a newer snapshot. A snapshot
// records where it ends (SqliteStore::Mark), so a merge exports only the rows the job wrote
// after it rather than the whole suite memory it started from.
#pragma once

#include <filesystem>

namespace kforge::executor {

/// Copies the suite's memory `suite_memory` (created and seeded from `seed_knowledge` when it
/// does not exist yet) to the new file `target`, marked with where it ends. Throws Error naming
/// the file that cannot be opened or written (`target` must not exist).
void snapshot_memory(const std::filesystem::path& suite_memory,
                     const std::filesystem::path& seed_knowledge,
                     const std::filesystem::path& target);

/// What one merge did: evidence rows new to the suite's memory, and exported rows it already
/// had (a merge of the same job done before; for an unmarked file also the rows of the snapshot
/// it started from).
struct MemoryMerge {
  int evidence_added = 0;
  int evidence_skipped = 0;
  int runs_added = 0;
  /// True when the job's file carried a snapshot mark and only the rows past it were exported;
  /// false for a file from a kforge before marks, exported whole (its duplicates skipped).
  bool past_mark_only = false;
};

/// Merges the evidence and recorded runs the job wrote into `job_memory` after its snapshot
/// (everything in it when it has no mark), and any node or edge the suite's memory lacks, into
/// `suite_memory`, in one transaction; repeating a merge adds nothing. Throws Error naming the
/// file when either cannot be opened, the job's file is not a kforge memory, or its mark is
/// malformed.
MemoryMerge merge_memory(const std::filesystem::path& job_memory,
                         const std::filesystem::path& suite_memory,
                         const std::filesystem::path& seed_knowledge);

}  // namespace kforge::executor

// The memory of a suite whose tasks run as Slurm jobs. SQLite over a network filesystem is not
// safe for concurrent writers, so no job writes the suite's memory: each starts from a snapshot
// (a copy made by the driver right before it submits the job) and writes its evidence there; the
// driver merges a finished job's file back (SqliteStore::import_json: evidence already present
// is skipped, statistics are recomputed), so later jobs start from a newer snapshot.
#pragma once

#include <filesystem>

namespace kforge::executor {

/// Copies the suite's memory `suite_memory` (created and seeded from `seed_knowledge` when it
/// does not exist yet) to the new file `target`. Throws Error naming the file that cannot be
/// opened or written (`target` must not exist).
void snapshot_memory(const std::filesystem::path& suite_memory,
                     const std::filesystem::path& seed_knowledge,
                     const std::filesystem::path& target);

/// What one merge did: evidence rows new to the suite's memory, and rows it already had (from
/// the snapshot the job started from, or a merge done before).
struct MemoryMerge {
  int evidence_added = 0;
  int evidence_skipped = 0;
};

/// Merges the evidence (and any node or edge the suite's memory lacks) of `job_memory` into
/// `suite_memory`, in one transaction. Throws Error naming the file when either cannot be opened
/// or the job's file is not a kforge memory.
MemoryMerge merge_memory(const std::filesystem::path& job_memory,
                         const std::filesystem::path& suite_memory,
                         const std::filesystem::path& seed_knowledge);

}  // namespace kforge::executor

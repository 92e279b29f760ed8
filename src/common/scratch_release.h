// Freeing scratch files off the evaluation's critical path.
//
// A full-size check's outputs travel through a scratch file of gigabytes (mapped_file.h). On
// the H100 machine, unmapping a 6.4 GB file and removing it took 0.29-0.33 s and 0.39-0.43 s
// (bench/ladder/README.md, "Where the check's 2.2 s go"), seconds in which the device waits for
// nothing. The files are still made fresh for every check (a reused file would hold an earlier
// candidate's outputs); only their removal moves to a background thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mapped_file.h"

namespace kforge {

/// One background thread that unmaps and removes finished scratch files in the order given.
/// Thread-safe. At most `max_pending` releases wait at a time (each may hold gigabytes of
/// memory-backed pages): release() blocks while that many are queued.
class ScratchRelease {
 public:
  explicit ScratchRelease(int max_pending = 2);
  /// Finishes every queued release, then joins the thread.
  ~ScratchRelease();
  ScratchRelease(const ScratchRelease&) = delete;
  ScratchRelease& operator=(const ScratchRelease&) = delete;

  /// Queues `mapping` (may be empty) to be unmapped and then `paths` to be removed (a missing
  /// file is not an error: its directory may be gone already).
  void release(std::vector<std::string> paths, MappedFile mapping = {});
  /// Returns once every release queued before the call is done.
  void flush();

 private:
  struct Item {
    std::vector<std::string> paths;
    MappedFile mapping;
  };
  void run();

  const size_t max_pending_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool busy_ = false;      // the thread holds an item it took off the queue
  bool stopping_ = false;
  std::thread thread_;
};

/// The process's ScratchRelease (made at first use).
ScratchRelease& scratch_release();

/// Queues `paths` and `mapping` on scratch_release() when it goes out of scope, on every way
/// out of the scope that made it (an early return on a failed case included).
struct ReleaseLater {
  std::vector<std::string> paths;
  MappedFile mapping;
  ReleaseLater() = default;
  explicit ReleaseLater(std::string path) { paths.push_back(std::move(path)); }
  ~ReleaseLater() { scratch_release().release(std::move(paths), std::move(mapping)); }
  ReleaseLater(const ReleaseLater&) = delete;
  ReleaseLater& operator=(const ReleaseLater&) = delete;
};

}  // namespace kforge

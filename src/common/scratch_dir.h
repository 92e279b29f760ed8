// A private scratch directory for the raw tensors kforge's processes exchange.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace kforge {

/// Creates a fresh directory (mode 0700) under /dev/shm when it is writable and has
/// `min_free_bytes` free (memory-backed, so gigabyte tensors move at memory speed; containers
/// often give it only 64 MiB), else under $TMPDIR or /tmp; removes it and everything in it on
/// destruction. Throws Error when no directory can be created.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "kforge", int64_t min_free_bytes = 0);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  /// A new file name in the directory, unique for this object: "<path>/<stem>-<n>.bin".
  /// Thread-safe (several workers' evaluations share one directory).
  std::string next_file(const std::string& stem);

 private:
  std::string path_;
  std::atomic<int> next_ = 0;
};

}  // namespace kforge

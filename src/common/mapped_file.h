// A file mapped into memory, for the large raw tensors that travel between kforge's processes
// (a worker writes a kernel's outputs, the orchestrator compares them) without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kforge {

class MappedFile {
 public:
  enum class Mode { read, write };

  /// Maps `path`. Mode::write resizes the existing file to `bytes` (it must already exist: the
  /// orchestrator creates it, so a worker never creates files) and maps it shared and writable;
  /// Mode::read maps the whole file read-only (`bytes` ignored). A zero-size mapping is valid
  /// and empty. Throws Error naming the path and the failing call.
  MappedFile(const std::string& path, Mode mode, int64_t bytes = 0);
  /// No mapping (size 0): a place to move one into.
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::byte* data() { return static_cast<std::byte*>(data_); }
  const std::byte* data() const { return static_cast<const std::byte*>(data_); }
  int64_t size() const { return size_; }
  std::span<const std::byte> bytes(int64_t offset, int64_t count) const;

 private:
  void* data_ = nullptr;
  int64_t size_ = 0;
};

/// Creates (or truncates to zero) `path` with mode 0600, so only this user can read it.
/// Throws Error naming the path.
void create_private_file(const std::string& path);

}  // namespace kforge

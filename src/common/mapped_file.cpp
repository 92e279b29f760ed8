#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

[[noreturn]] void fail(const std::string& path, const char* call) {
  throw Error(path + ": " + call + " failed: " + std::strerror(errno));
}

}  // namespace

MappedFile::MappedFile(const std::string& path, Mode mode, int64_t bytes) {
  const int fd = ::open(path.c_str(), (mode == Mode::write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fail(path, "open");
  if (mode == Mode::write) {
    if (bytes < 0) {
      ::close(fd);
      throw Error(path + ": cannot map a negative size");
    }
    // Reserve the blocks now (not a sparse ftruncate): a full disk or tmpfs is then an error
    // here, instead of a SIGBUS when a page is first written.
    if (::ftruncate(fd, 0) != 0 || (bytes > 0 && ::posix_fallocate(fd, 0, bytes) != 0)) {
      const int error = errno;
      ::close(fd);
      errno = error == 0 ? ENOSPC : error;
      fail(path, "posix_fallocate (no space left for the tensor file?)");
    }
    size_ = bytes;
  } else {
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      ::close(fd);
      fail(path, "fstat");
    }
    size_ = info.st_size;
  }
  if (size_ > 0) {
    const int protection = mode == Mode::write ? PROT_READ | PROT_WRITE : PROT_READ;
    data_ = ::mmap(nullptr, static_cast<size_t>(size_), protection, MAP_SHARED, fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      fail(path, "mmap");
    }
  }
  ::close(fd);  // the mapping keeps the file's pages alive
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, static_cast<size_t>(size_));
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, static_cast<size_t>(size_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::span<const std::byte> MappedFile::bytes(int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset + count > size_) {
    throw Error("mapped file: bytes [" + std::to_string(offset) + ", " +
                std::to_string(offset + count) + ") asked of a file of " +
                std::to_string(size_) + " bytes");
  }
  return {data() + offset, static_cast<size_t>(count)};
}

void create_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail(path, "open");
  ::close(fd);
}

}  // namespace kforge

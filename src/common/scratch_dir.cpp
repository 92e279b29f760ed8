#include "common/scratch_dir.h"

#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/scratch_release.h"

namespace kforge {

ScratchDir::ScratchDir(const std::string& prefix, int64_t min_free_bytes) {
  std::vector<std::string> roots;
  struct statvfs shm {};
  if (::access("/dev/shm", W_OK) == 0 && ::statvfs("/dev/shm", &shm) == 0 &&
      static_cast<int64_t>(shm.f_bavail) * static_cast<int64_t>(shm.f_frsize) >= min_free_bytes) {
    roots.push_back("/dev/shm");
  }
  if (const char* tmp = std::getenv("TMPDIR"); tmp && *tmp) roots.push_back(tmp);
  roots.push_back("/tmp");
  std::string errors;
  for (const std::string& root : roots) {
    std::string pattern = root + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) {  // mkdtemp creates it with mode 0700
      path_ = pattern;
      return;
    }
    errors += " " + root + ": " + std::strerror(errno) + ";";
  }
  throw Error("cannot create a scratch directory:" + errors);
}

ScratchDir::~ScratchDir() {
  // Files of this directory may still be queued for removal (scratch_release.h): done first,
  // so that the two never remove the same entry at once.
  scratch_release().flush();
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string ScratchDir::next_file(const std::string& stem) {
  return path_ + "/" + stem + "-" + std::to_string(next_++) + ".bin";
}

}  // namespace kforge

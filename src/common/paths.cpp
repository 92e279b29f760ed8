#include "common/paths.h"

#include <cstdlib>
#include <filesystem>

#include "common/error.h"

namespace kforge {
namespace fs = std::filesystem;

std::string user_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "kforge").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "kforge").string();
  }
  return "";
}

std::string artifact_cache_dir() {
  if (const char* dir = std::getenv("KFORGE_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  const std::string cache = user_cache_dir();
  return ((cache.empty() ? fs::path("/tmp") / ".cache" / "kforge" : fs::path(cache)) / "artifacts")
      .string();
}

std::string executable_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot read /proc/self/exe: " + ec.message());
  return self.parent_path().string();
}

std::string resource_root() {
  auto holds_header = [](const fs::path& root) {
    return fs::exists(root / "include" / "kforge" / "kernel.h");
  };
  if (const char* home = std::getenv("KFORGE_HOME"); home != nullptr && *home != '\0') {
    if (!holds_header(home)) {
      throw Error(std::string("KFORGE_HOME=") + home + " does not contain include/kforge/kernel.h");
    }
    return fs::absolute(home).string();
  }
  for (fs::path dir = executable_dir(); !dir.empty(); dir = dir.parent_path()) {
    if (holds_header(dir)) return dir.string();
    if (dir == dir.parent_path()) break;
  }
#ifdef KFORGE_SOURCE_DIR
  if (holds_header(KFORGE_SOURCE_DIR)) return KFORGE_SOURCE_DIR;
#endif
  throw Error("cannot find the kforge root (include/kforge/kernel.h) above " + executable_dir() +
              "; set KFORGE_HOME to the kforge checkout");
}

std::vector<std::string> kernel_include_dirs() {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("KFORGE_DLPACK_INCLUDE"); dir != nullptr && *dir != '\0') {
    candidates.emplace_back(dir);
  }
  fs::path exe = executable_dir();
  candidates.insert(candidates.end(), {exe / "include", exe.parent_path() / "include",
                                       "/usr/include", "/usr/local/include"});
  for (const fs::path& dir : candidates) {
    if (fs::exists(dir / "dlpack" / "dlpack.h")) {
      const fs::path root = resource_root();
      return {(root / "include").string(), (root / "kernels").string(), dir.string()};
    }
  }
  throw Error("dlpack/dlpack.h not found (kernels include it through kforge/kernel.h): install "
              "libdlpack-dev, or set KFORGE_DLPACK_INCLUDE to the directory that holds dlpack/");
}

std::string worker_binary_path() {
  if (const char* path = std::getenv("KFORGE_WORKER"); path != nullptr && *path != '\0') {
    return path;
  }
  // The build folder's programs below its root (bench/, tests/) find the worker beside kforge.
  const fs::path exe = executable_dir();
  for (const fs::path& dir : {exe, exe.parent_path()}) {
    if (fs::exists(dir / "kforge-worker")) return (dir / "kforge-worker").string();
  }
  return (exe / "kforge-worker").string();
}

}  // namespace kforge

#include "common/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "common/error.h"

namespace kforge {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// The file a write to `path` lands in: `path` with its symbolic links followed (a link kept as a
// link, e.g. a dotfile linked into a repository, or /dev/stdout), at most 40 hops as in Linux.
fs::path link_target(const fs::path& path) {
  fs::path target = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(target, ec); ++hops) {
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) break;
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  return target;
}

// Writes in place, for what cannot be replaced by a rename: a terminal, a pipe, /dev/null.
void write_in_place(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.flush();
  if (!out) throw Error(cannot_write(path));
}

}  // namespace

void write_file_atomically(const fs::path& path, const std::string& text) {
  // The messages name `path`, the user's file, not the temporary one.
  if (path.empty()) throw Error("cannot write a file with an empty name");
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows links
  if (fs::is_directory(status)) throw Error(cannot_write(path));
  if (fs::exists(status) && !fs::is_regular_file(status)) return write_in_place(path, text);
  // Renaming over a link would replace the link itself by a regular file: replace its target.
  const fs::path target = link_target(path);
  // Unique per process and thread: the compile pool writes from several threads at once.
  fs::path temporary = target;
  temporary += ".tmp" + std::to_string(::getpid()) + "_" +
               std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      const int error = errno;
      fs::remove(temporary, ec);
      errno = error;
      throw Error(cannot_write(path));
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);  // no stray temporary beside the user's file
    throw Error("cannot write " + path.string() + ": " + ec.message());
  }
}

std::string cannot_write(const fs::path& path) {
  const int error = errno;
  std::error_code ec;
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string why;
  if (!fs::exists(parent, ec)) {
    why = "its folder " + parent.string() + " does not exist";
  } else if (!fs::is_directory(parent, ec)) {
    why = parent.string() + " is not a folder";
  } else if (fs::is_directory(path, ec)) {
    why = "it is a folder";
  } else {
    why = error != 0 ? std::strerror(error) : "the write failed";
  }
  return "cannot write " + path.string() + ": " + why;
}

std::string find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return std::filesystem::exists(program) ? program : "";
  }
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

}  // namespace kforge

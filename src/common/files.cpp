#include "common/files.h"

#include <unistd.h>

#include <cerrno>
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

void write_file_atomically(const fs::path& path, const std::string& text) {
  // Unique per process and thread: the compile pool writes from several threads at once.
  fs::path temporary = path;
  temporary += ".tmp" + std::to_string(::getpid()) + "_" +
               std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  std::error_code ec;
  // The messages name `path`, the user's file, not the temporary one.
  if (fs::is_directory(path, ec)) throw Error(cannot_write(path));
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
  fs::rename(temporary, path, ec);
  if (ec) throw Error("cannot rename " + temporary.string() + " to " + path.string() + ": " + ec.message());
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

}  // namespace kforge

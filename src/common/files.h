// Small file helpers shared by the modules that write results.
#pragma once

#include <filesystem>
#include <string>

namespace kforge {

/// The whole file as bytes. Throws Error naming the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// Writes `text` to a temporary file beside `path` and renames it over `path`, so a reader (or a
/// crash) never sees a half-written file and a failed write leaves `path` as it was. Throws
/// Error naming `path` on failure (cannot_write's reasons; `path` being a folder or empty
/// included), leaving no temporary file behind. A symbolic link is followed and kept (its target
/// is replaced); what is not a regular file (a terminal, a pipe, /dev/null) is written in place.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

/// "cannot write PATH: WHY" for a file that could not be opened or written, WHY being the first
/// of: its folder does not exist, its folder is not a folder, PATH is a folder, the errno of the
/// failed call (read right after it).
std::string cannot_write(const std::filesystem::path& path);

/// `program` looked up on $PATH (the first executable of that name), or `program` itself when it
/// contains a '/' and exists; "" when neither.
std::string find_on_path(const std::string& program);

}  // namespace kforge

// Small file helpers shared by the modules that write results.
#pragma once

#include <filesystem>
#include <string>

namespace kforge {

/// The whole file as bytes. Throws Error naming the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// Writes `text` to a temporary file beside `path` and renames it over `path`, so a reader (or a
/// crash) never sees a half-written file. Throws Error naming the path on failure.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace kforge

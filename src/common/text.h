// Small text helpers shared by modules that parse one-line formats (Slurm's squeue output, a
// task's epilogue ops).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace kforge {

/// `text` cut at every `separator`, empty fields kept ("a::b:" -> {"a", "", "b", ""}); an
/// empty text is no field at all.
inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, separator)) fields.push_back(field);
  if (!text.empty() && text.back() == separator) fields.emplace_back();
  return fields;
}

}  // namespace kforge

#include "llm/model_new_reply.h"

#include <algorithm>
#include <initializer_list>
#include <regex>
#include <sstream>
#include <vector>

namespace kforge::llm {
namespace {

bool python_language(const std::string& language) {
  return language.empty() || language == "python" || language == "py" || language == "python3";
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// The source without comments and string literals' contents (a line-preserving rough cut: #
// comments to the end of the line, quotes kept, their contents blanked), for "is this name
// used" questions that a docstring mentioning `torch.` must not answer.
std::string code_only(const std::string& source) {
  std::string out = source;
  size_t i = 0;
  while (i < out.size()) {
    const char c = out[i];
    if (c == '#') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (c == '"' || c == '\'') {
      const bool triple = out.compare(i, 3, std::string(3, c)) == 0;
      const size_t open = triple ? 3 : 1;
      size_t j = i + open;
      while (j < out.size()) {
        if (out[j] == '\\') {
          j += 2;
          continue;
        }
        if (triple ? out.compare(j, 3, std::string(3, c)) == 0 : out[j] == c) break;
        if (!triple && out[j] == '\n') break;
        ++j;
      }
      for (size_t k = i + open; k < j && k < out.size(); ++k) {
        if (out[k] != '\n') out[k] = ' ';
      }
      i = j + (j < out.size() && out[j] != '\n' ? open : 0);
    } else {
      ++i;
    }
  }
  return out;
}

// Some line of `code` matches `pattern` (`^` anchors at a line's start). Line by line, and
// lines past kLongLine skipped: libstdc++'s matcher recurses per character a `.*` consumes, and
// the reply is untrusted.
bool matches(const std::string& code, const char* pattern) {
  constexpr size_t kLongLine = 4000;
  const std::regex regex(pattern);
  for (const std::string& line : split_lines(code)) {
    if (line.size() <= kLongLine && std::regex_search(line, regex)) return true;
  }
  return false;
}

struct ImportRule {
  const char* line;       // what to add
  const char* bound;      // a regex: the name is already bound
  const char* used;       // a regex: the module uses the name
};

// Removes top-level `if __name__ == "__main__":` blocks; true when one was removed.
bool remove_main_blocks(std::string& source) {
  static const std::regex main_guard(R"re(^if\s+__name__\s*==\s*['"]__main__['"]\s*:)re");
  std::vector<std::string> lines = split_lines(source), kept;
  bool removed = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], main_guard)) {
      kept.push_back(lines[i]);
      continue;
    }
    removed = true;
    // The block runs to the next non-blank line at column 0 that is not a comment.
    while (i + 1 < lines.size()) {
      const std::string& next = lines[i + 1];
      const size_t first = next.find_first_not_of(" \t");
      if (first == 0 && next[0] != '#') break;
      ++i;
    }
  }
  if (removed) source = join_lines(kept);
  return removed;
}

// Offset of the first line that starts with one of `prefixes`, or npos.
size_t first_line_starting(const std::string& text, std::initializer_list<const char*> prefixes) {
  size_t at = 0;
  while (at < text.size()) {
    for (const char* prefix : prefixes) {
      if (text.compare(at, std::string(prefix).size(), prefix) == 0) return at;
    }
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) break;
    at = newline + 1;
  }
  return std::string::npos;
}

}  // namespace

bool defines_model_new(const std::string& source) {
  return matches(code_only(source), R"re(^class\s+ModelNew\b)re");
}

std::optional<ExtractedCode> extract_model_new(const std::string& reply) {
  std::vector<FencedBlock> python;
  for (FencedBlock& block : fenced_code_blocks(reply)) {
    if (python_language(block.language) &&
        block.body.find_first_not_of(" \t\n") != std::string::npos) {
      python.push_back(std::move(block));
    }
  }
  if (python.empty()) {
    // Unfenced: a module that defines ModelNew, from its first import.
    const size_t first_import = first_line_starting(reply, {"import ", "from "});
    if (!defines_model_new(reply) || first_import == std::string::npos) return std::nullopt;
    ExtractedCode code;
    code.source = reply.substr(first_import);
    code.language = "python";
    code.from_fence = false;
    return code;
  }
  const FencedBlock* chosen = nullptr;
  for (const FencedBlock& block : python) {
    if (defines_model_new(block.body)) chosen = &block;  // the last one wins
  }
  if (chosen == nullptr) {
    for (const FencedBlock& block : python) {
      if (chosen == nullptr || block.body.size() > chosen->body.size()) chosen = &block;
    }
  }
  ExtractedCode code;
  code.source = chosen->body;
  code.language = chosen->language;
  code.blocks_found = static_cast<int>(python.size());
  code.truncated = !chosen->closed;
  return code;
}

RepairResult repair_model_new(const std::string& source) {
  static const ImportRule kImports[] = {
      {"import torch", R"re(^(import\s+torch\b|from\s+torch\b))re", R"re(\btorch\s*\.)re"},
      {"import torch.nn as nn", R"re(^(import\s+torch\.nn\s+as\s+nn\b|from\s+torch\s+import\b.*\bnn\b))re",
       R"re((^|[^\w.])nn\s*\.)re"},
      {"import torch.nn.functional as F",
       R"re(^(import\s+torch\.nn\.functional\s+as\s+F\b|from\s+torch\.nn\s+import\b.*\bfunctional\s+as\s+F\b))re",
       R"re((^|[^\w.])F\s*\.)re"},
      {"from torch.utils.cpp_extension import load_inline",
       R"re(^from\s+torch\.utils\.cpp_extension\s+import\b.*\bload_inline\b)re",
       R"re((^|[^\w.])load_inline\s*\()re"},
      {"import triton", R"re(^import\s+triton\s*$|^import\s+triton\s*,|^import\s+triton\s+as\s+triton\b)re",
       R"re((^|[^\w.])triton\s*\.\s*(jit|autotune|Config|cdiv|heuristics|next_power_of_2)\b)re"},
      {"import triton.language as tl",
       R"re(^(import\s+triton\.language\s+as\s+tl\b|from\s+triton\s+import\b.*\blanguage\s+as\s+tl\b))re",
       R"re((^|[^\w.])tl\s*\.)re"},
  };
  RepairResult result;
  result.source = source;
  if (remove_main_blocks(result.source)) {
    result.fixes.push_back("removed the `if __name__ == \"__main__\":` block");
  }
  const std::string code = code_only(result.source);
  std::vector<std::string> added;
  for (const ImportRule& rule : kImports) {
    if (matches(code, rule.used) && !matches(code, rule.bound)) added.push_back(rule.line);
  }
  if (added.empty()) return result;
  std::string header;
  for (const std::string& line : added) header += line + "\n";
  // After a `from __future__` import, which must stay first; else at the top.
  size_t at = first_line_starting(result.source, {"from __future__ "});
  at = at == std::string::npos ? 0 : std::min(result.source.size(), result.source.find('\n', at) + 1);
  result.source.insert(at, header);
  std::string list;
  for (const std::string& line : added) list += (list.empty() ? "`" : "`, `") + line;
  result.fixes.push_back("added missing imports " + list + "`");
  return result;
}

}  // namespace kforge::llm

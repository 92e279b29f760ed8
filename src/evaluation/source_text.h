// A candidate's source text as static checks see it (evaluation/source_policy.h): comments
// removed the way the compiler removes them, and every place mapped back to a line and column
// of the original text. Only a lexer, not a preprocessor: macros are not expanded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::evaluation {

inline bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/// The source with line splices (backslash, optional blanks, newline) undone, each comment
/// replaced by spaces (newlines kept) and each whitespace run collapsed to one character
/// ('\n' if the run held one). `text` keeps string and character literals; `code` is the same
/// with each literal, quotes included, blanked too (whitespace runs are collapsed where `text`
/// has them, so a blanked literal stays a run of spaces in `code`). All three vectors have one
/// entry per character: `origin[i]` is the byte offset in the original source of text[i] and
/// code[i]. Collapsing bounds what a regex can consume in one run of whitespace, which keeps
/// libstdc++'s recursive matcher from overflowing the stack on an untrusted source.
struct PreparedSource {
  std::string text;
  std::string code;
  std::vector<size_t> origin;
};

/// Lexes `source` as C++/CUDA: // and /* */ comments, "..." and '...' literals (escapes,
/// R"delim(...)delim" raw strings, 1'000 digit separators). An unterminated literal ends at the
/// end of its line, an unterminated comment at the end of the source.
PreparedSource prepare_source(std::string_view source);

/// Where a byte offset of the original source is.
struct SourceLocation {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in bytes
};

/// Maps byte offsets of one source to lines, columns and excerpts. Keeps a view of `source`,
/// which must outlive it. Offsets past the end are clamped to it.
class SourceLocator {
 public:
  explicit SourceLocator(std::string_view source);

  /// O(log lines).
  SourceLocation locate(size_t offset) const;

  /// The line holding `offset`, trimmed, at most ~100 printable ASCII characters (others become
  /// '?': the source is untrusted and excerpts reach a terminal); a longer line is cut around
  /// the offset, with "..." marking the cuts. O(line length).
  std::string excerpt(size_t offset) const;

 private:
  std::string_view source_;
  std::vector<size_t> line_starts_;
};

}  // namespace kforge::evaluation

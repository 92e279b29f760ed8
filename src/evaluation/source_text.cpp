#include "evaluation/source_text.h"

#include <algorithm>

namespace kforge::evaluation {
namespace {

// True when the quote at s[i] separates digits (1'000'000) rather than opening a literal: it
// continues a pp-number (a run that starts with a digit) and is followed by a digit or letter.
bool is_digit_separator(const std::string& s, size_t i) {
  if (i == 0 || !is_identifier_char(s[i - 1])) return false;
  if (i + 1 >= s.size() || !is_identifier_char(s[i + 1])) return false;
  size_t k = i;
  while (k > 0 && (is_identifier_char(s[k - 1]) || s[k - 1] == '\'' || s[k - 1] == '.')) --k;
  return s[k] >= '0' && s[k] <= '9';
}

// Length of the literal that opens at s[i] (a quote), up to and including its closing quote, or
// to the end of the line when it is not closed. Handles R"delim(...)delim" raw strings.
size_t literal_length(const std::string& s, size_t i) {
  bool raw = s[i] == '"' && i > 0 && s[i - 1] == 'R';
  if (raw) {
    size_t p = i - 1;
    while (p > 0 && (s[p - 1] == 'u' || s[p - 1] == 'U' || s[p - 1] == 'L' || s[p - 1] == '8')) --p;
    raw = p == 0 || !is_identifier_char(s[p - 1]);
  }
  if (raw) {
    size_t open = s.find('(', i);
    if (open == std::string::npos) return s.size() - i;
    std::string close = ")" + s.substr(i + 1, open - i - 1) + "\"";
    size_t end = s.find(close, open);
    return end == std::string::npos ? s.size() - i : end + close.size() - i;
  }
  size_t j = i + 1;
  while (j < s.size() && s[j] != s[i] && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
  return std::min(j + 1, s.size()) - i;
}

// Removes comments from the spliced source: `text` keeps literals, `code` blanks them.
void strip_comments(const std::string& s, std::string& text, std::string& code) {
  text = s;
  code = s;
  auto blank = [&](size_t from, size_t to, bool in_text) {
    for (size_t k = from; k < to; ++k) {
      if (s[k] == '\n') continue;
      code[k] = ' ';
      if (in_text) text[k] = ' ';
    }
  };
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      size_t end = std::min(s.find('\n', i), s.size());
      blank(i, end, true);
      i = end;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t close = s.find("*/", i + 2);
      size_t end = close == std::string::npos ? s.size() : close + 2;
      blank(i, end, true);
      i = end;
    } else if (s[i] == '"' || (s[i] == '\'' && !is_digit_separator(s, i))) {
      size_t length = literal_length(s, i);
      blank(i, i + length, false);
      i += length;
    } else {
      ++i;
    }
  }
}

}  // namespace

PreparedSource prepare_source(std::string_view source) {
  std::string spliced;
  std::vector<size_t> spliced_origin;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\') {
      // A backslash, optional blanks, then a newline: GCC and Clang splice the lines.
      size_t j = i + 1;
      while (j < source.size() && (source[j] == ' ' || source[j] == '\t' || source[j] == '\r')) ++j;
      if (j < source.size() && source[j] == '\n') {
        i = j;
        continue;
      }
    }
    spliced.push_back(source[i]);
    spliced_origin.push_back(i);
  }
  std::string text, code;
  strip_comments(spliced, text, code);
  PreparedSource prepared;
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_space(text[i]) && !prepared.text.empty() && is_space(prepared.text.back())) {
      if (text[i] == '\n') prepared.text.back() = prepared.code.back() = '\n';
      continue;
    }
    prepared.text.push_back(text[i]);
    prepared.code.push_back(code[i]);
    prepared.origin.push_back(spliced_origin[i]);
  }
  return prepared;
}

SourceLocator::SourceLocator(std::string_view source) : source_(source) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\n') line_starts_.push_back(i + 1);
  }
}

SourceLocation SourceLocator::locate(size_t offset) const {
  offset = std::min(offset, source_.size());
  size_t line =
      std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin();
  return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
}

std::string SourceLocator::excerpt(size_t offset) const {
  SourceLocation at = locate(offset);
  size_t begin = line_starts_[at.line - 1];
  size_t end = std::min(source_.find('\n', begin), source_.size());
  size_t column = static_cast<size_t>(at.column - 1);
  std::string_view text = source_.substr(begin, end - begin);

  constexpr size_t kWidth = 100, kBefore = 40;
  size_t from = text.size() > kWidth && column > kBefore ? column - kBefore : 0;
  size_t to = std::min(text.size(), from + kWidth);
  std::string out = from > 0 ? "..." : "";
  for (char c : text.substr(from, to - from)) {
    out.push_back(c == '\t' ? ' ' : (c >= 0x20 && c < 0x7f) ? c : '?');
  }
  if (to < text.size()) out += "...";
  size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

}  // namespace kforge::evaluation

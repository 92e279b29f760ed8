#include "search/duplicates.h"

#include <cctype>

#include "common/hash.h"

namespace kforge::search {
namespace {

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Builds the normalized text line by line: whitespace and comments only mark a pending space,
// which becomes one space before the next character of the same line.
class LineWriter {
 public:
  explicit LineWriter(bool keep_indentation) : keep_indentation_(keep_indentation) {}

  void put(char c) {
    if (line_.empty()) {
      line_ = indent_;
      indent_.clear();
    } else if (space_pending_) {
      line_ += ' ';
    }
    space_pending_ = false;
    line_ += c;
  }
  // Whitespace (or a comment): at a line's start it is indentation, kept for Python.
  void space(char c) {
    if (line_.empty()) {
      if (keep_indentation_) indent_ += c;
      return;
    }
    space_pending_ = true;
  }
  void end_line() {
    if (!line_.empty()) out_ += line_ + '\n';
    line_.clear();
    indent_.clear();
    space_pending_ = false;
  }
  // The last character written on this line (0 when none).
  char last() const { return line_.empty() ? '\0' : line_.back(); }
  // The run of word characters that ends the line (an identifier or a number being written).
  std::string_view word() const {
    size_t start = line_.size();
    while (start > 0 && is_word(line_[start - 1])) --start;
    return std::string_view(line_).substr(start);
  }
  std::string finish() {
    end_line();
    return std::move(out_);
  }

 private:
  bool keep_indentation_;
  bool space_pending_ = false;
  std::string indent_;
  std::string line_;
  std::string out_;
};

// Copies the quoted literal that starts at source[at] (the opening quote, `quotes` long: 1 or 3)
// verbatim, backslash escapes included; returns the index after it. A one-quote literal ends at
// a line break when unterminated (the compiler's error, not ours).
size_t copy_literal(std::string_view source, size_t at, size_t quotes, LineWriter& out) {
  const char quote = source[at];
  for (size_t k = 0; k < quotes; ++k) out.put(source[at + k]);
  size_t i = at + quotes;
  while (i < source.size()) {
    const char c = source[i];
    if (c == '\\' && i + 1 < source.size()) {
      out.put(c);
      out.put(source[i + 1]);
      i += 2;
      continue;
    }
    if (c == '\n' && quotes == 1) return i;
    if (c == quote && source.compare(i, quotes, std::string(quotes, quote)) == 0) {
      for (size_t k = 0; k < quotes; ++k) out.put(quote);
      return i + quotes;
    }
    out.put(c);
    ++i;
  }
  return i;
}

// A C++ raw string literal R"delim( ... )delim" whose quote is at source[at]; returns the index
// after it, or npos when this is not one (no '(' within the 16 characters a delimiter may have).
size_t copy_raw_string(std::string_view source, size_t at, LineWriter& out) {
  const size_t open = source.find('(', at + 1);
  if (open == std::string_view::npos || open - at - 1 > 16) return std::string_view::npos;
  const std::string close = ")" + std::string(source.substr(at + 1, open - at - 1)) + "\"";
  size_t end = source.find(close, open);
  end = end == std::string_view::npos ? source.size() : end + close.size();
  for (size_t i = at; i < end; ++i) out.put(source[i]);
  return end;
}

bool raw_prefix(std::string_view word) {
  return word == "R" || word == "LR" || word == "uR" || word == "UR" || word == "u8R";
}

std::string normalize_cpp(std::string_view source) {
  LineWriter out(false);
  bool line_start = true;  // nothing but whitespace since the source's last line break
  bool directive = false;  // in a preprocessor line (it ends at an unescaped line break)
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    const char next = i + 1 < source.size() ? source[i + 1] : '\0';
    if (c == '\n') {
      // Outside a directive a line break is whitespace like any other; a directive's ends it
      // (unless a backslash continues it, which stays before the break).
      if (directive) {
        directive = out.last() == '\\';
        out.end_line();
      } else {
        out.space(c);
      }
      line_start = true;
      ++i;
      continue;
    }
    const bool blank = c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (c == '#' && line_start && !directive) {
      out.end_line();
      directive = true;
    }
    // A comment is whitespace too: `/* note */ #define` is a directive.
    const bool comment = c == '/' && (next == '/' || next == '*');
    if (!blank && !comment) line_start = false;
    if (blank) {
      out.space(c);
      ++i;
    } else if (c == '/' && next == '/') {
      // To the line's end; a backslash before the line break continues it (translation phase 2).
      i += 2;
      while (i < source.size() && !(source[i] == '\n' && source[i - 1] != '\\')) ++i;
      out.space(' ');
    } else if (c == '/' && next == '*') {
      // One space, line breaks inside included (translation phase 3).
      const size_t end = source.find("*/", i + 2);
      i = end == std::string_view::npos ? source.size() : end + 2;
      out.space(' ');
    } else if (c == '"' && raw_prefix(out.word())) {
      const size_t end = copy_raw_string(source, i, out);
      i = end != std::string_view::npos ? end : copy_literal(source, i, 1, out);
    } else if (c == '"') {
      i = copy_literal(source, i, 1, out);
    } else if (c == '\'' && !out.word().empty() &&
               std::isdigit(static_cast<unsigned char>(out.word().front())) != 0) {
      out.put(c);  // a digit separator (1'000'000), not a character literal
      ++i;
    } else if (c == '\'') {
      i = copy_literal(source, i, 1, out);
    } else {
      out.put(c);
      ++i;
    }
  }
  return out.finish();
}

std::string normalize_python(std::string_view source) {
  LineWriter out(true);
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    if (c == '\n') {
      out.end_line();
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      out.space(c);
      ++i;
    } else if (c == '#') {
      while (i < source.size() && source[i] != '\n') ++i;
      out.space(' ');
    } else if (c == '\'' || c == '"') {
      const bool triple = source.compare(i, 3, std::string(3, c)) == 0;
      i = copy_literal(source, i, triple ? 3 : 1, out);
    } else {
      out.put(c);
      ++i;
    }
  }
  return out.finish();
}

}  // namespace

SourceLanguage language_of(std::string_view source_name) {
  return source_name.ends_with(".py") ? SourceLanguage::python : SourceLanguage::cpp;
}

std::string normalized_source(std::string_view source, SourceLanguage language) {
  return language == SourceLanguage::python ? normalize_python(source) : normalize_cpp(source);
}

std::string duplicate_key(const compile::CompileJob& job) {
  const SourceLanguage language = language_of(job.source_name);
  // Length-prefixed fields, so that no field's text can pass for another's.
  std::string text;
  auto field = [&](std::string_view value) {
    text += std::to_string(value.size()) + ":";
    text += value;
    text += ";";
  };
  field(job.backend);
  field(language == SourceLanguage::python ? "python" : "cpp");
  field(normalized_source(job.source, language));
  for (const auto& [name, value] : job.defines) {
    field(name);
    field(value);
  }
  if (!job.cuda_arch.empty()) field("cuda_arch=" + job.cuda_arch);  // another binary
  return sha256_hex(text);
}

}  // namespace kforge::search

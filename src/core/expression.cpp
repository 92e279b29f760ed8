#include "core/expression.h"

#include <cctype>
#include <cstdlib>

#include "common/error.h"

namespace kforge {
namespace {

// Recursive-descent parser: expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*;
// factor := number | symbol | '(' expr ')' | '-' factor.
class Parser {
 public:
  Parser(const std::string& text, const std::map<std::string, int64_t>& dims)
      : text_(text), dims_(dims) {}

  double parse() {
    double value = expression();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return value;
  }

 private:
  double expression() {
    double value = term();
    for (skip_space(); pos_ < text_.size() && (peek() == '+' || peek() == '-'); skip_space()) {
      char op = text_[pos_++];
      double rhs = term();
      value = op == '+' ? value + rhs : value - rhs;
    }
    return value;
  }

  double term() {
    double value = factor();
    for (skip_space(); pos_ < text_.size() && (peek() == '*' || peek() == '/'); skip_space()) {
      char op = text_[pos_++];
      double rhs = factor();
      value = op == '*' ? value * rhs : value / rhs;
    }
    return value;
  }

  double factor() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    char c = peek();
    if (c == '(') {
      ++pos_;
      double value = expression();
      skip_space();
      if (pos_ >= text_.size() || peek() != ')') fail("expected ')'");
      ++pos_;
      return value;
    }
    if (c == '-') {
      ++pos_;
      return -factor();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return symbol();
    fail("unexpected '" + std::string(1, c) + "'");
    return 0.0;
  }

  double number() {
    const char* start = text_.c_str() + pos_;
    char* end = nullptr;
    double value = std::strtod(start, &end);
    pos_ += static_cast<size_t>(end - start);
    return value;
  }

  double symbol() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) {
      ++pos_;
    }
    std::string name = text_.substr(start, pos_ - start);
    auto found = dims_.find(name);
    if (found == dims_.end()) fail("symbol '" + name + "' is not a workload dimension");
    return static_cast<double>(found->second);
  }

  char peek() const { return text_[pos_]; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("formula '" + text_ + "' at position " + std::to_string(pos_) + ": " + what);
  }

  const std::string& text_;
  const std::map<std::string, int64_t>& dims_;
  size_t pos_ = 0;
};

}  // namespace

double evaluate_expression(const std::string& text, const std::map<std::string, int64_t>& dims) {
  return Parser(text, dims).parse();
}

}  // namespace kforge

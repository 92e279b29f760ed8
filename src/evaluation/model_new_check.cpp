#include "evaluation/model_new_check.h"

#include <sstream>

#include "evaluation/source_text.h"

namespace kforge::evaluation {
namespace {

std::string trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> split_lines(std::string_view source) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(source)};
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// `line` starts with `word` followed by a non-identifier character.
bool starts_with_word(std::string_view line, std::string_view word) {
  return line.substr(0, word.size()) == word &&
         (line.size() == word.size() || !is_identifier_char(line[word.size()]));
}

size_t indentation(const std::string& line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i;
}

bool blank_or_comment(const std::string& line) {
  const size_t i = indentation(line);
  return i == line.size() || line[i] == '#';
}

// The text from `open` (an opening parenthesis) to its match, across lines, joined by spaces;
// nullopt when it never closes.
std::optional<std::string> parenthesized(const std::vector<std::string>& lines, size_t row,
                                         size_t open) {
  std::string text;
  int depth = 0;
  for (size_t r = row; r < lines.size(); ++r) {
    const std::string& line = lines[r];
    for (size_t c = r == row ? open : 0; c < line.size(); ++c) {
      const char ch = line[c];
      if (ch == '#') break;
      if (ch == '(' || ch == '[' || ch == '{') ++depth;
      if (ch == ')' || ch == ']' || ch == '}') --depth;
      text += ch;
      if (depth == 0) return text;
    }
    text += ' ';
  }
  return std::nullopt;
}

// Splits "(self, a: int = 3, *args, **kw)" into trimmed parameters at bracket depth 1.
std::vector<std::string> split_parameters(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!trim(current).empty()) parts.push_back(trim(current));
  return parts;
}

// Parameter names after self: annotations, defaults and stars dropped, the `/` and `*` markers
// left out (Python's inspect.signature names, which the candidate worker compares).
std::vector<std::string> parameter_names(const std::string& text) {
  std::vector<std::string> names;
  std::vector<std::string> parts = split_parameters(text);
  for (size_t i = 1; i < parts.size(); ++i) {  // parts[0] is self
    std::string name = parts[i].substr(0, parts[i].find_first_of(":="));
    name = trim(name);
    while (!name.empty() && name.front() == '*') name.erase(0, 1);
    if (!name.empty() && name != "/") names.push_back(name);
  }
  return names;
}

std::string collapse_spaces(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ' && out.back() != '(') out += ' ';
    } else {
      if (c == ')' && !out.empty() && out.back() == ' ') out.pop_back();
      out += c;
    }
  }
  return out;
}

// Reads the body of the class whose statement is at `row`: its __init__, if it defines one.
void read_body(const std::vector<std::string>& lines, size_t row, PythonClassShape& shape) {
  for (size_t r = row + 1; r < lines.size(); ++r) {
    const std::string& line = lines[r];
    if (blank_or_comment(line)) continue;
    const size_t indent = indentation(line);
    if (indent == 0) return;  // the class ended
    std::string_view rest = std::string_view(line).substr(indent);
    if (!starts_with_word(rest, "def")) continue;
    rest.remove_prefix(3);
    const size_t name_at = rest.find_first_not_of(" \t");
    if (name_at == std::string_view::npos || !starts_with_word(rest.substr(name_at), "__init__")) {
      continue;
    }
    const size_t open = line.find('(', indent);
    if (open == std::string::npos) return;
    std::optional<std::string> parameters = parenthesized(lines, r, open);
    if (!parameters) return;
    shape.has_init = true;
    shape.init_text = collapse_spaces(*parameters);
    shape.init_parameters = parameter_names(*parameters);
    return;
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

PythonClassShape python_class_shape(std::string_view source, std::string_view name) {
  PythonClassShape shape;
  const std::vector<std::string> lines = split_lines(source);
  for (size_t r = 0; r < lines.size(); ++r) {
    const std::string& line = lines[r];
    if (starts_with_word(line, "class")) {
      const size_t at = line.find_first_not_of(" \t", 5);
      if (at == std::string::npos || !starts_with_word(std::string_view(line).substr(at), name)) {
        continue;
      }
      shape = PythonClassShape{};  // a later definition replaces an earlier one, as in Python
      shape.found = true;
      const size_t open = line.find('(', at + name.size());
      const size_t colon = line.find(':', at + name.size());
      if (open != std::string::npos && (colon == std::string::npos || open < colon)) {
        if (std::optional<std::string> bases = parenthesized(lines, r, open)) {
          shape.bases = collapse_spaces(bases->substr(1, bases->size() - 2));
          shape.bases = trim(shape.bases);
        }
      }
      read_body(lines, r, shape);
      continue;
    }
    // `ModelNew = Other` or `from x import ModelNew` at the top level binds it another way.
    if (starts_with_word(line, name)) {
      const size_t after = line.find_first_not_of(" \t", name.size());
      if (after != std::string::npos && line[after] == '=' &&
          (after + 1 >= line.size() || line[after + 1] != '=')) {
        shape.bound_otherwise = true;
      }
    } else if ((starts_with_word(line, "from") || starts_with_word(line, "import"))) {
      const size_t at = line.find(name);
      if (at != std::string::npos && (at == 0 || !is_identifier_char(line[at - 1])) &&
          (at + name.size() >= line.size() || !is_identifier_char(line[at + name.size()]))) {
        shape.bound_otherwise = true;
      }
    }
  }
  return shape;
}

std::string check_model_new_signature(std::string_view candidate, std::string_view problem) {
  const PythonClassShape model = python_class_shape(problem, "Model");
  const PythonClassShape model_new = python_class_shape(candidate, "ModelNew");
  const std::string expected =
      model.has_init ? "Model.__init__" + model.init_text : std::string("Model's constructor");
  if (!model_new.found) {
    if (model_new.bound_otherwise) return "";
    return "the candidate defines no ModelNew: expected a top-level `class ModelNew(nn.Module)` "
           "whose __init__ takes the same arguments as " + expected;
  }
  if (!model.has_init) return "";
  if (!model_new.has_init) {
    const bool plain_module = model_new.bases == "nn.Module" ||
                              model_new.bases == "torch.nn.Module" || model_new.bases == "Module";
    if (!plain_module || model.init_parameters.empty()) return "";
    return "ModelNew defines no __init__, so it does not take Model's constructor arguments (" +
           join(model.init_parameters) + "); define ModelNew.__init__" + model.init_text +
           " and create the same parameters as Model, in the same order";
  }
  if (model_new.init_parameters == model.init_parameters) return "";
  return "ModelNew.__init__" + model_new.init_text + " differs from " + expected +
         ": ModelNew must take the same constructor arguments, in the same order (it is built as "
         "ModelNew(*get_init_inputs()), like Model), and create the same parameters";
}

}  // namespace kforge::evaluation

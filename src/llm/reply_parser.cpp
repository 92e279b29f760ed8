#include "llm/reply_parser.h"

#include <algorithm>
#include <array>
#include <set>
#include <sstream>
#include <string_view>

#include "backends/backend.h"
#include "evaluation/source_text.h"

namespace kforge::llm {
namespace {

using evaluation::is_identifier_char;

// ---- extraction ------------------------------------------------------------------------------

// The reply without <think>...</think> spans (an unclosed one runs to the end).
std::string drop_thinking(const std::string& reply) {
  std::string out;
  size_t at = 0;
  while (true) {
    size_t open = reply.find("<think>", at);
    if (open == std::string::npos) break;
    out.append(reply, at, open - at);
    size_t close = reply.find("</think>", open);
    if (close == std::string::npos) return out;
    at = close + 8;
  }
  out.append(reply, at);
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A fence line: up to three spaces, then ``` or ~~~ (3 or more). Returns the fence and info.
bool fence_line(const std::string& line, std::string* fence, std::string* info) {
  size_t i = line.find_first_not_of(' ');
  if (i == std::string::npos || i > 3) return false;
  char c = line[i];
  if (c != '`' && c != '~') return false;
  size_t n = line.find_first_not_of(c, i);
  size_t count = (n == std::string::npos ? line.size() : n) - i;
  if (count < 3) return false;
  *fence = std::string(count, c);
  std::string rest = n == std::string::npos ? "" : line.substr(n);
  rest.erase(0, rest.find_first_not_of(" \t"));
  rest = rest.substr(0, rest.find_first_of(" \t{\r"));
  *info = lower(rest);
  return true;
}

std::vector<FencedBlock> fenced_blocks(const std::string& text) {
  std::vector<FencedBlock> blocks;
  std::istringstream in(text);
  std::string line;
  FencedBlock* open = nullptr;
  std::string open_fence;
  while (std::getline(in, line)) {
    std::string fence, info;
    if (open == nullptr) {
      if (fence_line(line, &fence, &info)) {
        blocks.push_back({info, "", false});
        open = &blocks.back();
        open_fence = fence;
      }
      continue;
    }
    if (fence_line(line, &fence, &info) && info.empty() && fence[0] == open_fence[0] &&
        fence.size() >= open_fence.size()) {
      open->closed = true;
      open = nullptr;
      continue;
    }
    open->body += line + "\n";
  }
  return blocks;
}

bool usable_language(const std::string& language, const std::string& backend) {
  const std::vector<std::string>& tags = backends::get_backend(backend).fence_languages;
  return std::find(tags.begin(), tags.end(), language) != tags.end();
}

}  // namespace

std::vector<FencedBlock> fenced_code_blocks(const std::string& reply) {
  return fenced_blocks(drop_thinking(reply));
}

// ---- shared scanning helpers -------------------------------------------------------------------

namespace {

// `source` with comments and string/char literals replaced by spaces (newlines kept), so that
// positions in it are positions in `source`.
std::string blank_comments_and_literals(const std::string& source) {
  std::string out = source;
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < source.size()) {
    if (source.compare(i, 2, "//") == 0) {
      size_t end = source.find('\n', i);
      end = end == std::string::npos ? source.size() : end;
      blank(i, end);
      i = end;
    } else if (source.compare(i, 2, "/*") == 0) {
      size_t end = source.find("*/", i + 2);
      end = end == std::string::npos ? source.size() : end + 2;
      blank(i, end);
      i = end;
    } else if (source[i] == '"' ||
               (source[i] == '\'' &&
                (i == 0 || !std::isxdigit(static_cast<unsigned char>(source[i - 1]))))) {
      char quote = source[i];
      size_t k = i + 1;
      while (k < source.size() && source[k] != quote && source[k] != '\n')
        k += source[k] == '\\' ? 2 : 1;
      blank(i, std::min(k + 1, source.size()));
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

// Whole-word occurrences of `word` in `code`.
std::vector<size_t> word_positions(const std::string& code, std::string_view word) {
  std::vector<size_t> positions;
  for (size_t at = code.find(word); at != std::string::npos; at = code.find(word, at + 1)) {
    bool left = at == 0 || !is_identifier_char(code[at - 1]);
    bool right = at + word.size() >= code.size() || !is_identifier_char(code[at + word.size()]);
    if (left && right) positions.push_back(at);
  }
  return positions;
}

size_t skip_space(const std::string& code, size_t i) {
  while (i < code.size() && evaluation::is_space(code[i])) ++i;
  return i;
}

// Index of the bracket matching the one at `open`, or npos.
size_t match_bracket(const std::string& code, size_t open) {
  char o = code[open];
  char c = o == '(' ? ')' : o == '{' ? '}' : ']';
  int depth = 0;
  for (size_t i = open; i < code.size(); ++i) {
    if (code[i] == o) ++depth;
    if (code[i] == c && --depth == 0) return i;
  }
  return std::string::npos;
}

// Where the declaration holding position `name` starts: after the previous ';', '{', '}' or
// preprocessor line.
size_t declaration_start(const std::string& code, size_t name) {
  size_t i = name;
  while (i > 0) {
    char c = code[i - 1];
    if (c == ';' || c == '{' || c == '}') break;
    if (c == '\n') {
      // The line that ends at i - 1: a preprocessor line ends the search.
      size_t line_start = i >= 2 ? code.rfind('\n', i - 2) : std::string::npos;
      line_start = line_start == std::string::npos ? 0 : line_start + 1;
      size_t first = skip_space(code, line_start);
      if (first < i && code[first] == '#') break;
    }
    --i;
  }
  return skip_space(code, i);
}

// A function declared or defined at `name` (an identifier followed by a parameter list, with a
// return type before it): its parameter list's parentheses and, for a definition, its body.
struct FunctionAt {
  size_t name = 0;
  size_t open_paren = 0;
  size_t close_paren = 0;
  size_t body_open = std::string::npos;  // npos: a declaration
  size_t decl_start = 0;
};

std::optional<FunctionAt> function_at(const std::string& code, size_t name, size_t name_size) {
  FunctionAt f;
  f.name = name;
  f.open_paren = skip_space(code, name + name_size);
  if (f.open_paren >= code.size() || code[f.open_paren] != '(') return std::nullopt;
  f.close_paren = match_bracket(code, f.open_paren);
  if (f.close_paren == std::string::npos) return std::nullopt;
  f.decl_start = declaration_start(code, name);
  std::string prefix = code.substr(f.decl_start, name - f.decl_start);
  // A declaration has a return type before the name; a call has `return`, `=`, `(` or nothing.
  if (prefix.find_first_not_of(" \t\n") == std::string::npos) return std::nullopt;
  if (prefix.find('=') != std::string::npos || prefix.find("return") != std::string::npos ||
      prefix.find('(') != std::string::npos) {
    return std::nullopt;
  }
  size_t after = skip_space(code, f.close_paren + 1);
  if (after < code.size() && code[after] == '{') f.body_open = after;
  return f;
}

std::vector<FunctionAt> functions_named(const std::string& code, std::string_view name) {
  std::vector<FunctionAt> found;
  for (size_t at : word_positions(code, name)) {
    if (auto f = function_at(code, at, name.size())) found.push_back(*f);
  }
  return found;
}

bool defines(const std::string& source, std::string_view name) {
  std::string code = blank_comments_and_literals(source);
  for (const FunctionAt& f : functions_named(code, name)) {
    if (f.body_open != std::string::npos) return true;
  }
  return false;
}

// Names of functions defined with a kforge_args parameter.
std::set<std::string> entry_like_functions(const std::string& code) {
  std::set<std::string> names;
  for (size_t at : word_positions(code, "kforge_args")) {
    size_t open = code.rfind('(', at);
    if (open == std::string::npos || code.find(')', open) < at) continue;
    size_t end = open;
    while (end > 0 && evaluation::is_space(code[end - 1])) --end;
    size_t begin = end;
    while (begin > 0 && is_identifier_char(code[begin - 1])) --begin;
    if (begin == end) continue;
    std::string name = code.substr(begin, end - begin);
    auto f = function_at(code, begin, name.size());
    if (f && f->body_open != std::string::npos) names.insert(name);
  }
  return names;
}

}  // namespace

std::optional<ExtractedCode> extract_kernel(const std::string& reply, const std::string& backend) {
  std::string text = drop_thinking(reply);
  std::vector<FencedBlock> usable;
  std::vector<FencedBlock> blocks = fenced_blocks(text);
  for (FencedBlock& b : blocks) {
    if (usable_language(b.language, backend) &&
        b.body.find_first_not_of(" \t\n") != std::string::npos) {
      usable.push_back(std::move(b));
    }
  }
  if (usable.empty() && !blocks.empty()) return std::nullopt;  // only other languages
  if (usable.empty()) {
    // Unfenced: a source that starts at its first #include and defines a function.
    size_t include = text.find("#include");
    if (include == std::string::npos || text.find('{', include) == std::string::npos) {
      return std::nullopt;
    }
    ExtractedCode code;
    code.source = text.substr(include);
    code.from_fence = false;
    return code;
  }
  const FencedBlock* chosen = nullptr;
  for (const FencedBlock& b : usable) {
    if (defines(b.body, "kforge_run")) chosen = &b;  // the last one wins
  }
  auto larger = [](const FencedBlock* best, const FencedBlock& b) {
    return best == nullptr || b.body.size() > best->body.size();
  };
  if (chosen == nullptr) {
    for (const FencedBlock& b : usable) {
      if (!entry_like_functions(blank_comments_and_literals(b.body)).empty() && larger(chosen, b)) {
        chosen = &b;
      }
    }
  }
  if (chosen == nullptr) {
    for (const FencedBlock& b : usable) {
      if (larger(chosen, b)) chosen = &b;
    }
  }
  ExtractedCode code;
  code.source = chosen->body;
  code.language = chosen->language;
  code.blocks_found = static_cast<int>(usable.size());
  code.truncated = !chosen->closed;
  return code;
}

// ---- repair ----------------------------------------------------------------------------------

namespace {

// Replaces whole-word `from` by `to` in `source`, outside comments and literals.
std::string rename_identifier(const std::string& source, const std::string& from,
                              const std::string& to) {
  std::string code = blank_comments_and_literals(source);
  std::vector<size_t> positions = word_positions(code, from);
  std::string out = source;
  for (auto it = positions.rbegin(); it != positions.rend(); ++it)
    out.replace(*it, from.size(), to);
  return out;
}

bool remove_main(std::string& source) {
  std::string code = blank_comments_and_literals(source);
  for (const FunctionAt& f : functions_named(code, "main")) {
    if (f.body_open == std::string::npos) continue;
    size_t close = match_bracket(code, f.body_open);
    if (close == std::string::npos) continue;
    source.erase(f.decl_start, close + 1 - f.decl_start);
    return true;
  }
  return false;
}

// Inside an `extern "C" { ... }` block?
bool inside_extern_c_block(const std::string& source, const std::string& code, size_t at) {
  for (size_t e = source.find("extern \"C\""); e != std::string::npos && e < at;
       e = source.find("extern \"C\"", e + 1)) {
    size_t brace = skip_space(code, e + 10);
    if (brace < code.size() && code[brace] == '{') {
      size_t close = match_bracket(code, brace);
      if (close == std::string::npos || close > at) return true;
    }
  }
  return false;
}

// Gives every declaration of kforge_run C linkage and a const argument. Returns fixes made.
std::vector<std::string> fix_entry_declarations(std::string& source) {
  std::vector<std::string> fixes;
  bool linkage = false, constness = false;
  // Edits go from the end so that earlier positions stay valid.
  std::string code = blank_comments_and_literals(source);
  std::vector<FunctionAt> found = functions_named(code, "kforge_run");
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    std::string params = code.substr(it->open_paren, it->close_paren - it->open_paren);
    size_t args = params.find("kforge_args");
    if (args != std::string::npos) {
      std::string before = params.substr(0, args);
      if (before.find("const") == std::string::npos) {
        source.insert(it->open_paren + args, "const ");
        constness = true;
      }
    }
    std::string prefix = source.substr(it->decl_start, it->name - it->decl_start);
    if (prefix.find("KFORGE_API") != std::string::npos ||
        prefix.find("extern \"C\"") != std::string::npos ||
        inside_extern_c_block(source, code, it->name)) {
      continue;
    }
    std::string fixed = prefix;
    for (const char* drop : {"static ", "inline "}) {
      for (size_t p = fixed.find(drop); p != std::string::npos; p = fixed.find(drop)) {
        fixed.erase(p, std::string(drop).size());
      }
    }
    source.replace(it->decl_start, prefix.size(), "KFORGE_API " + fixed);
    linkage = true;
  }
  if (linkage) fixes.push_back("gave kforge_run C linkage (KFORGE_API)");
  if (constness) fixes.push_back("made kforge_run's argument `const kforge_args*`");
  return fixes;
}

struct IncludeRule {
  std::string header;
  std::vector<std::string> uses;  // whole words or prefixes ending in '_' / "::"
};

bool uses_any(const std::string& code, const std::vector<std::string>& uses) {
  for (const std::string& use : uses) {
    std::string_view u(use);
    bool prefix = u.back() == '_' || u.back() == ':';
    for (size_t at = code.find(u); at != std::string::npos; at = code.find(u, at + 1)) {
      bool left = at == 0 || !is_identifier_char(code[at - 1]);
      bool right =
          prefix || at + u.size() >= code.size() || !is_identifier_char(code[at + u.size()]);
      if (left && right) return true;
    }
  }
  return false;
}

std::vector<std::string> add_missing_includes(std::string& source, const std::string& backend) {
  static const std::vector<IncludeRule> kRules = {
      {"cmath", {"std::sqrt",  "std::exp",   "std::log",      "std::fabs", "std::tanh", "std::pow",
                 "std::isnan", "std::isinf", "std::isfinite", "std::fma",  "sqrtf",     "expf",
                 "logf",       "fabsf",      "tanhf",         "powf",      "fmaxf",     "fminf",
                 "INFINITY",   "NAN",        "HUGE_VALF"}},
      {"algorithm", {"std::max", "std::min", "std::fill", "std::copy", "std::sort", "std::clamp"}},
      // kforge/kernel.h includes <stdint.h>: only the std:: names need <cstdint>.
      {"cstdint",
       {"std::int64_t", "std::int32_t", "std::uint64_t", "std::uint32_t", "std::uint8_t"}},
      {"cstring", {"memcpy", "memset", "std::memcpy", "std::memset"}},
      {"cstddef", {"size_t"}},
      {"vector", {"std::vector"}},
      {"array", {"std::array"}},
      {"limits", {"std::numeric_limits"}},
      {"omp.h", {"omp_get_", "omp_set_"}},
  };
  std::string code = blank_comments_and_literals(source);
  std::set<std::string> included;
  std::istringstream lines(source);
  std::string line;
  size_t offset = 0, insert_at = 0;
  while (std::getline(lines, line)) {
    size_t hash = line.find_first_not_of(" \t");
    if (hash != std::string::npos && line[hash] == '#' &&
        line.find("include") != std::string::npos) {
      size_t open = line.find_first_of("<\"");
      size_t close = line.find_first_of(">\"", open + 1);
      if (open != std::string::npos && close != std::string::npos) {
        included.insert(line.substr(open + 1, close - open - 1));
      }
      insert_at = offset + line.size() + 1;
    }
    offset += line.size() + 1;
  }
  insert_at = std::min(insert_at, source.size());
  std::vector<std::string> added;
  if (!included.count("kforge/kernel.h")) added.push_back("kforge/kernel.h");
  // The C++ headers every backend's sources may need, then the backend's own (its table).
  std::vector<IncludeRule> rules = kRules;
  for (const backends::AutoInclude& own : backends::get_backend(backend).auto_includes) {
    rules.push_back({own.header, own.uses});
  }
  for (const IncludeRule& rule : rules) {
    if (!included.count(rule.header) && uses_any(code, rule.uses)) added.push_back(rule.header);
  }
  if (added.empty()) return {};
  std::string text;
  for (const std::string& h : added) text += "#include <" + h + ">\n";
  if (insert_at > 0 && source[insert_at - 1] != '\n') text = "\n" + text;
  source.insert(insert_at, text);
  std::string list;
  for (const std::string& h : added) list += (list.empty() ? "<" : ", <") + h + ">";
  return {"added missing includes " + list};
}

}  // namespace

RepairResult repair_kernel(const std::string& source, const std::string& backend) {
  RepairResult result;
  result.source = source;
  if (remove_main(result.source)) result.fixes.push_back("removed a stray main()");
  if (!defines(result.source, "kforge_run")) {
    std::set<std::string> names = entry_like_functions(blank_comments_and_literals(result.source));
    if (names.size() == 1) {
      std::string name = *names.begin();
      result.source = rename_identifier(result.source, name, "kforge_run");
      result.fixes.push_back("renamed the entry point " + name + " to kforge_run");
    }
  }
  for (std::string& fix : fix_entry_declarations(result.source)) result.fixes.push_back(fix);
  for (std::string& fix : add_missing_includes(result.source, backend)) result.fixes.push_back(fix);
  return result;
}

}  // namespace kforge::llm

#include "llm/prompt_template.h"

#include <algorithm>

#include "common/error.h"
#include "common/files.h"

namespace kforge::llm {
namespace fs = std::filesystem;
namespace {

int line_of(const std::string& text, size_t position) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + position, '\n'));
}

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  size_t end = s.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

}  // namespace

std::string render_template(const std::string& text, const PromptValues& values,
                            const std::string& where) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    size_t open = text.find("{{", at);
    if (open == std::string::npos) {
      out.append(text, at);
      break;
    }
    out.append(text, at, open - at);
    size_t close = text.find("}}", open + 2);
    auto fail = [&](const std::string& what) {
      throw Error(where + ":" + std::to_string(line_of(text, open)) + ": " + what);
    };
    if (close == std::string::npos) fail("unclosed '{{'");
    std::string tag = trim(text.substr(open + 2, close - open - 2));
    at = close + 2;
    if (tag.empty()) fail("empty '{{}}'");
    if (tag[0] == '!') {
      if (at < text.size() && text[at] == '\n') ++at;  // a comment line leaves no blank line
      continue;
    }
    if (tag[0] == '/') fail("{{" + tag + "}} without a matching {{#" + tag.substr(1) + "}}");
    if (tag[0] == '#') {
      std::string name = trim(tag.substr(1));
      std::string end_tag = "{{/" + name + "}}";
      size_t end = text.find(end_tag, at);
      if (end == std::string::npos) fail("{{#" + name + "}} is never closed by " + end_tag);
      auto value = values.find(name);
      if (value == values.end()) fail("{{#" + name + "}}: no value given for '" + name + "'");
      if (!value->second.empty()) {
        out += render_template(text.substr(at, end - at), values,
                               where + ":" + std::to_string(line_of(text, at)) + "+");
      }
      at = end + end_tag.size();
      continue;
    }
    auto value = values.find(tag);
    if (value == values.end()) fail("{{" + tag + "}}: no value given for '" + tag + "'");
    out += value->second;
  }
  return out;
}

PromptLibrary::PromptLibrary(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".md") {
      templates_[entry.path().stem().string()] = read_file(entry.path());
    }
  }
  if (ec || templates_.empty()) {
    throw Error(dir.string() + ": no prompt templates (*.md) found" +
                (ec ? " (" + ec.message() + ")" : ""));
  }
}

std::string PromptLibrary::render(const std::string& name, const PromptValues& values) const {
  auto it = templates_.find(name);
  if (it == templates_.end()) {
    throw Error((dir_ / (name + ".md")).string() + ": prompt template not found");
  }
  return render_template(it->second, values, (dir_ / (name + ".md")).string());
}

}  // namespace kforge::llm

// A small template renderer for the prompt files in prompts/ (Markdown with placeholders):
//   {{name}}                 the value of `name`
//   {{#name}} ... {{/name}}  the enclosed text only when `name` is non-empty (no nesting of
//                            the same name; other placeholders may appear inside)
//   {{! comment }}           removed, with the newline right after it
// A placeholder without a value is an error (so a template and its builder cannot drift apart
// silently); values are inserted verbatim, never re-scanned for placeholders.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace kforge::llm {

using PromptValues = std::map<std::string, std::string>;

/// Renders `text`. `where` names the template in errors. Throws Error
/// "<where>:<line>: {{name}}: ..." on a missing value, an unclosed section or an unclosed tag.
std::string render_template(const std::string& text, const PromptValues& values,
                            const std::string& where);

/// The prompt templates of one directory (prompts/ in the repository), read at construction.
class PromptLibrary {
 public:
  /// Reads every *.md file of `dir`. Throws Error when the folder is missing or empty.
  explicit PromptLibrary(const std::filesystem::path& dir);
  /// Renders template `name` ("generate" for generate.md). Throws Error on an unknown name.
  std::string render(const std::string& name, const PromptValues& values) const;

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::string> templates_;
};

}  // namespace kforge::llm

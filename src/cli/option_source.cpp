#include "cli/option_source.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdlib>

namespace kforge::cli {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

// Where `name` occurs in `text` as a whole word ("--device" is not found in "--devices").
size_t find_word(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const size_t end = at + name.size();
    const bool starts = at == 0 || !is_name_char(text[at - 1]);
    const bool ends = end == text.size() || !is_name_char(text[end]);
    if (starts && ends) return at;
  }
  return std::string::npos;
}

// True when `args` holds `name` as an argument ("--steps 3" or "--steps=3").
bool given(const std::vector<std::string>& args, const std::string& name) {
  for (const std::string& arg : args) {
    if (arg == name || arg.rfind(name + "=", 0) == 0) return true;
  }
  return false;
}

void collect_options(const CLI::App& app, std::vector<const CLI::Option*>& options) {
  for (const CLI::Option* option : app.get_options()) options.push_back(option);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    collect_options(*sub, options);
  }
}

}  // namespace

bool given_on_command_line(const CLI::Option& option, const std::vector<std::string>& args) {
  for (const std::string& name : option.get_lnames()) {
    if (given(args, "--" + name)) return true;
  }
  for (const std::string& name : option.get_snames()) {
    if (given(args, "-" + name)) return true;
  }
  return false;
}

std::set<std::string> options_on_command_line(const CLI::App& app,
                                              const std::vector<std::string>& args) {
  std::set<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_lnames().empty() || !given_on_command_line(*option, args)) continue;
    names.insert("--" + option->get_lnames().front());
  }
  return names;
}

std::string name_environment_source(const CLI::App& app, const std::vector<std::string>& args,
                                    const std::string& message) {
  std::vector<const CLI::Option*> options;
  collect_options(app, options);
  for (const CLI::Option* option : options) {
    const std::string variable = option->get_envname();
    const char* value = variable.empty() ? nullptr : std::getenv(variable.c_str());
    if (value == nullptr || *value == '\0') continue;
    if (given_on_command_line(*option, args)) continue;
    for (const std::string& name : option->get_lnames()) {
      const std::string flag = "--" + name;
      if (size_t at = find_word(message, flag); at != std::string::npos) {
        std::string named = message;
        named.insert(at + flag.size(), " (from " + variable + ")");
        return named;
      }
    }
  }
  return message;
}

}  // namespace kforge::cli

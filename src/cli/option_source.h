// Where an option's value came from: the command line or its environment variable
// (KFORGE_<NAME>). CLI11 does not say: it names only the option in its errors, also when the bad
// value came from the variable, and it counts a variable's value as the option given. It reads
// the variable only when the option is not on the command line, so the command line tells.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kforge::cli {

/// Rewrites the CLI11 parse error `message` of `app` (whose options and subcommands' options are
/// considered) so that an option whose value came from its environment variable names the
/// variable: "--steps: Value abc not in range 0 to 100000" becomes "--steps (from KFORGE_STEPS):
/// Value abc not in range 0 to 100000". A value came from the variable when the variable is set
/// and non-empty and none of the option's names is among `args` (CLI11 reads the variable only
/// then). Returns `message` unchanged when no such option is named in it.
/// True when one of `option`'s names is among `args` ("--steps 3", "--steps=3", "-o x"): its
/// value then came from the command line, not from its environment variable.
bool given_on_command_line(const CLI::Option& option, const std::vector<std::string>& args);

/// The options of `app` itself (not of its subcommands) given on the command line `args`, by
/// their first long name ("--max-cost-usd" for "--max-cost-usd,--llm-budget-usd").
std::set<std::string> options_on_command_line(const CLI::App& app,
                                              const std::vector<std::string>& args);

std::string name_environment_source(const CLI::App& app, const std::vector<std::string>& args,
                                    const std::string& message);

}  // namespace kforge::cli

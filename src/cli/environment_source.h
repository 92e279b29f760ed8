// Options settable from environment variables (KFORGE_<NAME>): CLI11 names only the option in
// its errors, also when the bad value came from the variable, which leaves a user looking for a
// flag they never typed.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kforge::cli {

/// Rewrites the CLI11 parse error `message` of `app` (whose options and subcommands' options are
/// considered) so that an option whose value came from its environment variable names the
/// variable: "--steps: Value abc not in range 0 to 100000" becomes "--steps (from KFORGE_STEPS):
/// Value abc not in range 0 to 100000". A value came from the variable when the variable is set
/// and non-empty and none of the option's names is among `args` (CLI11 reads the variable only
/// then). Returns `message` unchanged when no such option is named in it.
std::string name_environment_source(const CLI::App& app, const std::vector<std::string>& args,
                                    const std::string& message);

}  // namespace kforge::cli

// `kforge memory show|graph|export|import|reset`: look at and move the HTG memory.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace kforge::cli {

struct MemoryCommandOptions {
  std::string memory_path;  // default: memory::default_memory_path()
  std::string backend;      // show/graph: "" for all backends
  bool json = false;        // show: the export JSON instead of tables
  std::string output;       // graph: "" = DOT on stdout; .dot/.gv DOT; .svg/.png/.pdf by dot
  std::string file;         // export/import: the JSON file
  bool yes = false;         // reset: do not ask
};

/// Adds the `memory` subcommand and its subcommands to `app`, filling `options`.
void add_memory_command(CLI::App& app, MemoryCommandOptions& options);

/// Runs the memory subcommand that `app` parsed. Prints to stdout; returns the exit code.
/// Throws Error for a bad memory file or bad input (messages name the file). show, graph, export
/// and reset refuse a memory file named by the user (--memory, KFORGE_MEMORY, KFORGE_MEMORY_DB)
/// that does not exist, creating nothing; import creates it.
int run_memory(const CLI::App& memory, const MemoryCommandOptions& options);

}  // namespace kforge::cli

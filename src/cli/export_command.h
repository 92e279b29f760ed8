// `kforge export RUN_DIR --format kernelbench [-o FILE]`: a finished run of a PyTorch problem as
// a KernelBench-format solution.py (report/solution_export.h; docs/torch_solutions.md).
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace kforge::cli {

struct ExportCommandOptions {
  std::string run_dir;      // a finished run directory
  std::string format;       // "kernelbench", the one format so far
  std::string output_path;  // -o: default RUN_DIR/solution.py
};

void add_export_command(CLI::App& app, ExportCommandOptions& options);

/// Runs `kforge export`: writes the file and prints its path; returns 0. Throws Error naming
/// the run and why when it cannot (not a PyTorch problem's run, unfinished, no best kernel).
int run_export_command(const ExportCommandOptions& options);

}  // namespace kforge::cli

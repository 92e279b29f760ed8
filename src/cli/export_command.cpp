#include "cli/export_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "common/error.h"
#include "report/solution_export.h"

namespace kforge::cli {
namespace fs = std::filesystem;

void add_export_command(CLI::App& app, ExportCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "export", "Write a finished run in another format: --format kernelbench writes a PyTorch "
                "problem's run as solution.py, a KernelBench ModelNew running the best kernel");
  command->add_option("run_dir", options.run_dir, "a finished run directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--format", options.format,
                      "kernelbench: solution.py with class ModelNew (the problem's constructor, "
                      "the best kernel built by torch.utils.cpp_extension.load_inline)")
      ->required()
      ->check(CLI::IsMember({"kernelbench"}));
  command->add_option("-o,--output", options.output_path,
                      "where to write it (default RUN_DIR/solution.py)");
}

int run_export_command(const ExportCommandOptions& options) {
  const fs::path run_dir = fs::absolute(options.run_dir).lexically_normal();
  if (!report::is_torch_run(run_dir)) {
    throw Error(run_dir.string() + ": not a PyTorch problem's run (no reference.torch.json): "
                "a KernelBench solution is a ModelNew of the problem's Model, and a TOML task "
                "with a native reference has none");
  }
  const fs::path output =
      options.output_path.empty() ? run_dir / "solution.py" : fs::path(options.output_path);
  report::write_kernelbench_solution(run_dir, output);
  std::cout << fs::absolute(output).lexically_normal().string() << "\n";
  return 0;
}

}  // namespace kforge::cli

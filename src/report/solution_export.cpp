#include "report/solution_export.h"

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"
#include "common/scratch_dir.h"
#include "process/subprocess.h"
#include "task/torch_task.h"

namespace kforge::report {
namespace fs = std::filesystem;

namespace {

// The generator's last stderr line without its "kforge-torch: error: " prefix.
std::string generator_message(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t newline = text.rfind('\n');
  std::string line = newline == std::string::npos ? text : text.substr(newline + 1);
  const std::string prefix = "kforge-torch: error: ";
  return line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : line;
}

}  // namespace

bool is_torch_run(const fs::path& run_dir) {
  std::error_code error;
  return fs::is_regular_file(run_dir / "reference.torch.json", error);
}

namespace {

// Runs kforge's Python side (`argv`, under torch_environment()) for at most `timeout_s` and
// returns its stdout; throws Error with its own last error line, or saying that `what` did not
// finish or failed.
std::string run_torch_side(std::vector<std::string> argv, double timeout_s,
                           const std::string& what) {
  process::SpawnOptions options;
  options.argv = std::move(argv);
  options.environment = torch_environment();
  options.pipe_stdin = false;
  options.stderr_tail_bytes = 16384;
  process::Subprocess child(options);
  std::optional<process::ExitStatus> status = child.wait(timeout_s);
  if (!status) {
    child.kill();
    throw Error(what + " did not finish in " + std::to_string(static_cast<int>(timeout_s)) +
                " s");
  }
  std::string out = child.take_stdout();
  if (!status->exited || status->exit_code != 0) {
    std::string message = generator_message(child.stderr_tail());
    if (message.empty()) message = what + " failed (" + status->describe() + ")";
    throw Error(message);
  }
  return out;
}

}  // namespace

void write_kernelbench_solution(const fs::path& run_dir, const fs::path& output,
                                double timeout_s) {
  std::error_code error;
  if (!fs::is_directory(run_dir, error)) throw Error(run_dir.string() + ": not a directory");
  std::vector<std::string> argv = {torch_python(), "-m", "kforge_torch", "solution",
                                   fs::absolute(run_dir).string(), "-o",
                                   fs::absolute(output).string()};
  for (const std::string& dir : kernel_include_dirs()) {
    argv.push_back("--include-dir");
    argv.push_back(dir);
  }
  run_torch_side(std::move(argv), timeout_s, run_dir.string() + ": writing solution.py");
}

std::string model_new_shell(const nlohmann::json& derived, double timeout_s) {
  ScratchDir scratch("kforge-shell");
  const fs::path task = fs::path(scratch.path()) / "reference.torch.json";
  write_file_atomically(task, derived.dump());
  return run_torch_side({torch_python(), "-m", "kforge_torch", "model-new-shell", "--derived",
                         task.string()},
                        timeout_s,
                        "writing the ModelNew shell of " +
                            derived.value("name", std::string("the task")));
}

}  // namespace kforge::report

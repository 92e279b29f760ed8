// The kernel families of `kforge optimize` (optimize_command.h): which exist, and the one a
// task's templates run uses. Split from optimize_command.cpp, which sets the run up.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli/optimize_command.h"
#include "common/error.h"
#include "generation/kernel_family.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

// Every family with built-in kernels on some backend (kernels/<backend>/<family>/family.toml).
std::vector<std::string> known_families(const std::string& root) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& backend : fs::directory_iterator(fs::path(root) / "kernels", ec)) {
    std::error_code inner;
    for (const auto& family : fs::directory_iterator(backend.path(), inner)) {
      if (fs::exists(family.path() / "family.toml")) names.insert(family.path().filename().string());
    }
  }
  return {names.begin(), names.end()};
}

// The task's kernel family; an unknown one names the task file and the families there are.
generation::KernelFamily load_family_for(const Task& task, const std::string& root,
                                         const std::string& backend) {
  fs::path kernels = fs::path(root) / "kernels";
  if (task.has_torch_reference() && task.family.empty()) {
    // Say why no family matched: the derivation tried each by running it against the module.
    std::string misses;
    for (const auto& [families, why] : grouped_family_misses(task)) {
      misses += "\n  " + families + ": " + why;
    }
    throw Error(task.source_path + ": no built-in kernel family computes what this module "
                "computes, so the templates generator cannot optimize it: use --generator llm "
                "(a model writes a native kernel from the module)" +
                (misses.empty() ? std::string() : "; families tried:" + misses));
  }
  // `backend` names the folder: a backend's, or "triton" (kernels/triton/, run by cuda).
  if (!fs::exists(kernels / backend / task.family / "family.toml")) {
    std::string known;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(kernels / backend, ec)) {
      if (fs::exists(entry.path() / "family.toml")) {
        known += (known.empty() ? "" : ", ") + entry.path().filename().string();
      }
    }
    throw Error(task.source_path + ": family: no built-in " + backend + " kernels for '" +
                task.family + "' (known: " + (known.empty() ? "none" : known) +
                "); a new operator needs --generator llm, or its own " +
                (kernels / backend / task.family / "family.toml").string());
  }
  return generation::load_family(kernels.string(), backend, task.family);
}

}  // namespace kforge::cli

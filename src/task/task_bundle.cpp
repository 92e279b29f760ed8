#include "task/task_bundle.h"

#include <sstream>

#include <toml++/toml.h>

#include "common/error.h"
#include "common/files.h"
#include "task/torch_task.h"

namespace kforge {
namespace fs = std::filesystem;

namespace {

// Copies `from` into `dir` under its own name; two references of one name (cpu and cuda sources
// are .cpp and .cu, so only by accident) get the backend as a prefix.
std::string copy_reference(const std::string& backend, const fs::path& from, const fs::path& dir,
                           std::map<std::string, std::string>& taken) {
  std::string name = from.filename().string();
  if (auto it = taken.find(name); it != taken.end() && it->second != from.string()) {
    name = backend + "_" + name;
  }
  taken[name] = from.string();
  std::error_code ec;
  fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error("bundle: cannot copy " + from.string() + " to " + dir.string() + ": " + ec.message());
  return name;
}

}  // namespace

fs::path write_task_bundle(const Task& task, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("bundle: cannot create " + dir.string() + ": " + ec.message());
  std::map<std::string, std::string> taken;
  const fs::path toml = dir / "task.toml";
  if (task.has_torch_reference()) {
    Task local = task;
    const std::string name =
        copy_reference("torch", task.reference_paths.at("torch"), dir, taken);
    const std::string copy = (fs::absolute(dir) / name).lexically_normal().string();
    local.reference_paths["torch"] = copy;
    local.torch_reference["problem"] = copy;
    write_file_atomically(toml, torch_task_toml(local, fs::absolute(dir).string()));
    return toml;
  }
  toml::table root;
  try {
    root = toml::parse_file(task.source_path);
  } catch (const toml::parse_error& e) {
    throw Error("bundle: " + task.source_path + ": " + std::string(e.description()));
  }
  toml::table references;
  for (const auto& [backend, path] : task.reference_paths) {
    references.insert(backend, copy_reference(backend, path, dir, taken));
  }
  root.insert_or_assign("reference", std::move(references));
  std::ostringstream text;
  text << "# The task of a kforge run, with copies of its references beside it (kforge verify).\n"
       << "# From " << task.source_path << ".\n"
       << root << "\n";
  write_file_atomically(toml, text.str());
  return toml;
}

}  // namespace kforge

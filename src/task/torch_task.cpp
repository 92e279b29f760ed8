#include "task/torch_task.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>

#include "core/epilogue.h"
#include "common/error.h"
#include "common/paths.h"
#include "process/subprocess.h"
#include "task/torch_extents.h"

extern char** environ;

namespace kforge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A probe that has not answered in a minute is a broken install.
constexpr double kProbeTimeoutS = 60.0;
constexpr int kDerivedVersion = 1;

struct Finished {
  process::ExitStatus status;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv with `environment` to completion, stdout and stderr apart. Its stdin is /dev/null,
// or with `stdin_pipe` a pipe that stays open until it ends, so a child that watches for its
// end (derive --end-at-stdin-eof) ends when this process dies, however it dies.
Finished run_captured(const std::vector<std::string>& argv,
                      const std::vector<std::string>& environment, double timeout_s,
                      bool stdin_pipe = false) {
  process::SpawnOptions options;
  options.argv = argv;
  options.environment = environment;
  options.pipe_stdin = stdin_pipe;
  options.stderr_tail_bytes = 16384;
  process::Subprocess child(options);
  Finished finished;
  std::optional<process::ExitStatus> status = child.wait(timeout_s);
  if (!status) {
    finished.timed_out = true;
    status = child.kill();
  }
  finished.status = *status;
  finished.out = child.take_stdout();
  finished.err = child.stderr_tail();
  return finished;
}

std::vector<std::string> inherited_environment() {
  std::vector<std::string> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) entries.push_back(*entry);
  return entries;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t newline = text.rfind('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

// Why `python` has no torch, or "" when it has. Finding the package, not importing it: an import
// costs seconds (4-5 s for PyTorch 2.x with CUDA), and the derivation imports it right after.
std::string probe_python(const std::string& python) {
  try {
    const Finished probe = run_captured(
        {python, "-c",
         "import importlib.util, sys\n"
         "if importlib.util.find_spec('torch') is None: sys.exit('No module named torch')"},
        inherited_environment(), kProbeTimeoutS);
    if (probe.timed_out) return "looking for torch did not finish in 60 s";
    if (probe.status.exited && probe.status.exit_code == 0) return "";
    const std::string why = last_line(probe.err);
    return why.empty() ? probe.status.describe() : why;
  } catch (const Error& e) {
    return e.what();  // not found or not executable
  }
}

const json& field(const json& object, const std::string& name, const std::string& where) {
  auto found = object.find(name);
  if (found == object.end()) throw Error(where + ": missing field '" + name + "'");
  return *found;
}

// Keys a table may hold; any other is refused (a misspelt key would otherwise be dropped without
// a word, e.g. problem_sha256 switching the changed-file check off).
void check_keys(const json& object, std::initializer_list<const char*> known, const std::string& at) {
  if (!object.is_object()) throw Error(at + ": expected a table");
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    std::string expected;
    for (const char* name : known) {
      found = found || key == name;
      expected += (expected.empty() ? "" : ", ") + std::string(name);
    }
    if (!found) throw Error(at + "." + key + ": unknown key (expected one of " + expected + ")");
  }
}

void validate_torch_section(const Task& task, const json& torch_section, const std::string& where) {
  check_keys(torch_section,
             {"tensors", "scalars", "workloads", "double_reference", "fp32_model",
              "fp32_model_run", "extents"},
             where + ": torch");
  if (torch_section.contains("extents")) {
    validate_extents(task, torch_section.at("extents"), where + ": torch");
  }
  for (const char* flag : {"double_reference", "fp32_model", "fp32_model_run"}) {
    if (torch_section.contains(flag) && !torch_section.at(flag).is_boolean()) {
      throw Error(where + ": torch." + flag + ": expected true or false");
    }
  }
  const json& tensors = field(torch_section, "tensors", where + ": torch");
  if (!tensors.is_array() || tensors.size() != task.signature.tensors.size()) {
    throw Error(where + ": torch.tensors: expected one entry per signature tensor (" +
                std::to_string(task.signature.tensors.size()) + "), got " +
                std::to_string(tensors.is_array() ? tensors.size() : 0));
  }
  static const std::set<std::string> kSources = {"input", "parameter", "buffer", "output"};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string at = where + ": torch.tensors[" + std::to_string(i) + "]";
    check_keys(tensors[i], {"source", "index", "name"}, at);
    const std::string source = field(tensors[i], "source", at).get<std::string>();
    if ((source == "input" || source == "output") &&
        !(field(tensors[i], "index", at).is_number_integer() && tensors[i].at("index").get<int64_t>() >= 0)) {
      throw Error(at + ".index: expected a whole number >= 0 (the position among forward's "
                       "arguments or results)");
    }
    if (!kSources.count(source)) {
      throw Error(at + ".source: expected input, parameter, buffer or output, got '" + source + "'");
    }
    const bool is_output = task.signature.tensors[i].role == TensorRole::output;
    if (is_output && task.signature.tensors[i].provided) {
      throw Error(where + ": output '" + task.signature.tensors[i].name +
                  "' is marked provided: only inputs can be");
    }
    if (is_output != (source == "output")) {
      throw Error(at + ".source: '" + source + "' for " + (is_output ? "output" : "input") +
                  " tensor '" + task.signature.tensors[i].name + "'");
    }
  }
  const json& workloads = field(torch_section, "workloads", where + ": torch");
  for (const auto& [name, entry] : workloads.items()) {
    const bool known = std::any_of(task.workloads.begin(), task.workloads.end(),
                                   [&](const Workload& w) { return w.name == name; });
    if (!known) {
      throw Error(where + ": torch.workloads." + name + ": not a workload of the task (remove it, "
                          "or add the workload)");
    }
    check_keys(entry, {"constants", "shapes"}, where + ": torch.workloads." + name);
  }
  for (const Workload& workload : task.workloads) {
    auto found = workloads.find(workload.name);
    if (found == workloads.end()) {
      throw Error(where + ": torch.workloads: no entry for workload '" + workload.name +
                  "' (every workload needs the module's constants and shapes there)");
    }
    const json& shapes = field(*found, "shapes", where + ": torch.workloads." + workload.name);
    if (!shapes.is_array() || shapes.size() != task.signature.tensors.size()) {
      throw Error(where + ": torch.workloads." + workload.name +
                  ".shapes: expected one shape per signature tensor");
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      int64_t module_elements = 1;
      for (const json& extent : shapes[i]) module_elements *= extent.get<int64_t>();
      int64_t signature_elements = 1;
      for (int64_t extent : bind_shape(task.signature.tensors[i], workload)) signature_elements *= extent;
      if (module_elements != signature_elements) {
        throw Error(where + ": workload '" + workload.name + "': tensor '" +
                    task.signature.tensors[i].name + "' has " + std::to_string(signature_elements) +
                    " elements in the signature but " + std::to_string(module_elements) +
                    " in the module");
      }
    }
  }
}

void validate_task(Task& task, const std::string& where) {
  int inputs = 0, outputs = 0;
  std::set<std::string> names;
  for (const TensorSpec& tensor : task.signature.tensors) {
    (tensor.role == TensorRole::input ? inputs : outputs) += 1;
    if (!names.insert(tensor.name).second) throw Error(where + ": duplicate tensor name '" + tensor.name + "'");
  }
  for (const ScalarSpec& scalar : task.signature.scalars) {
    if (!names.insert(scalar.name).second) throw Error(where + ": duplicate name '" + scalar.name + "'");
  }
  if (inputs == 0 || outputs == 0) throw Error(where + ": expected at least one input and one output tensor");
  if (task.workloads.empty()) throw Error(where + ": expected at least one workload");
  bool any_timed = false;
  std::set<std::string> workload_names;
  for (const Workload& workload : task.workloads) {
    if (!workload_names.insert(workload.name).second) {
      throw Error(where + ": duplicate workload name '" + workload.name + "'");
    }
    any_timed = any_timed || workload.timed;
    for (const TensorSpec& tensor : task.signature.tensors) {
      with_context(where + ": workload '" + workload.name + "'", [&] { return bind_shape(tensor, workload); });
    }
  }
  if (!any_timed) throw Error(where + ": no workload is timed");
}

}  // namespace

bool is_torch_problem(const std::string& path) { return fs::path(path).extension() == ".py"; }

std::string torch_python() {
  static std::mutex mutex;
  static std::string found;
  std::lock_guard<std::mutex> lock(mutex);
  if (!found.empty()) return found;
  std::vector<std::string> candidates;
  const char* chosen = std::getenv("KFORGE_PYTHON");
  if (chosen != nullptr && *chosen != '\0') {
    candidates.push_back(chosen);
  } else {
    candidates = {"python3", "/usr/bin/python3"};
  }
  std::string tried;
  for (const std::string& python : candidates) {
    const std::string why = probe_python(python);
    if (why.empty()) return found = python;
    tried += (tried.empty() ? "" : "; ") + python + ": " + why;
  }
  throw Error("no Python that can import torch (" + tried + "); a PyTorch problem needs one: " +
              (chosen != nullptr && *chosen != '\0'
                   ? "fix or unset KFORGE_PYTHON"
                   : "install Debian's python3-torch (scripts/setup does) or set KFORGE_PYTHON "
                     "to an interpreter that can import torch"));
}

std::string python_bytecode_cache() {
  const char* chosen = std::getenv("KFORGE_PYCACHE");
  if (chosen != nullptr && *chosen != '\0') return std::string(chosen) == "off" ? "" : chosen;
  const std::string cache = user_cache_dir();
  return cache.empty() ? "" : (fs::path(cache) / "pycache").string();
}

std::vector<std::string> torch_environment(std::vector<std::string> base) {
  const std::string package_dir = (fs::path(resource_root()) / "python").string();
  std::string python_path = package_dir;
  std::string inputs_lib = (fs::path(executable_dir()) / "libkforge_inputs.so").string();
  if (const char* lib = std::getenv("KFORGE_INPUTS_LIB"); lib != nullptr && *lib != '\0') inputs_lib = lib;
  const bool own_prefix = std::any_of(base.begin(), base.end(), [](const std::string& entry) {
    return entry.rfind("PYTHONPYCACHEPREFIX=", 0) == 0;
  });
  const std::string bytecode_cache = own_prefix ? "" : python_bytecode_cache();
  std::vector<std::string> entries;
  for (std::string& entry : base) {
    if (entry.rfind("PYTHONPATH=", 0) == 0) {
      python_path += ":" + entry.substr(11);
    } else if (entry.rfind("KFORGE_INPUTS_LIB=", 0) == 0) {
      continue;
    } else if (!bytecode_cache.empty() && entry.rfind("PYTHONDONTWRITEBYTECODE=", 0) == 0) {
      continue;  // the bytecode goes to kforge's own cache folder, never next to the sources
    } else {
      entries.push_back(std::move(entry));
    }
  }
  entries.push_back("PYTHONPATH=" + python_path);
  entries.push_back("KFORGE_INPUTS_LIB=" + inputs_lib);
  if (!bytecode_cache.empty()) entries.push_back("PYTHONPYCACHEPREFIX=" + bytecode_cache);
  // Tracebacks and prints reach the orchestrator's stderr tail as they happen.
  entries.push_back("PYTHONUNBUFFERED=1");
  return entries;
}

std::vector<std::string> torch_environment() { return torch_environment(inherited_environment()); }

std::vector<std::string> torch_worker_command() {
  return {torch_python(), "-m", "kforge_torch", "worker"};
}

std::vector<std::string> torch_candidate_worker_command() {
  return {torch_python(), "-m", "kforge_torch", "candidate-worker"};
}

json derive_torch_task(const std::string& path, double timeout_s) {
  if (!fs::is_regular_file(path)) throw Error(path + ": problem file does not exist");
  const std::string absolute = fs::absolute(path).lexically_normal().string();
  const Finished derived =
      // Derived on the host at small sizes; whether the problem's own tensors fit is checked
      // against the device a run uses (evaluation::Evaluator::prepare), not the host's memory.
      // Its own process group, so a terminal's Ctrl-C reaches only kforge: the derivation ends
      // with kforge through its stdin (a module's forward may loop forever).
      run_captured({torch_python(), "-m", "kforge_torch", "derive", "--no-capacity-check",
                    "--end-at-stdin-eof", absolute},
                   torch_environment(), timeout_s, /*stdin_pipe=*/true);
  if (derived.timed_out) {
    throw Error(path + ": deriving the task did not finish in " + std::to_string(int(timeout_s)) +
                " s (kforge loads the module, builds it and runs forward at small sizes)");
  }
  if (!derived.status.exited || derived.status.exit_code != 0) {
    // The derivation's own last line names the file and what was expected.
    std::string message = last_line(derived.err);
    const std::string prefix = "kforge-torch: error: ";
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    if (message.empty()) {
      message = path + ": deriving the task failed (" + derived.status.describe() +
                ") without a message: the module may end the process itself (os._exit, a "
                "crash in an extension) while it is imported or runs forward";
    }
    throw Error(message);
  }
  if (derived.out.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw Error(path + ": the derivation ended (exit code 0) without printing the task: the "
                "module may end the process itself (os._exit(0)) while it is imported or runs "
                "forward");
  }
  try {
    return json::parse(derived.out);
  } catch (const json::exception& e) {
    throw Error(path + ": the derivation printed no valid JSON (" + std::string(e.what()) + ")");
  }
}

std::vector<std::pair<std::string, std::string>> family_misses(const Task& task) {
  std::vector<std::pair<std::string, std::string>> misses;
  const json tried = task.torch_reference.value("family_misses", json::object());
  if (!tried.is_object()) return misses;
  for (const auto& [family, why] : tried.items()) {
    misses.emplace_back(family, why.is_string() ? why.get<std::string>() : why.dump());
  }
  return misses;
}

std::vector<std::pair<std::string, std::string>> grouped_family_misses(const Task& task) {
  std::vector<std::pair<std::string, std::string>> grouped;
  for (const auto& [family, why] : family_misses(task)) {
    auto same = std::find_if(grouped.begin(), grouped.end(),
                             [&](const auto& entry) { return entry.second == why; });
    if (same == grouped.end()) {
      grouped.emplace_back(family, why);
    } else {
      same->first += ", " + family;
    }
  }
  return grouped;
}

bool compile_support_handed_down(const std::string& python) {
  const char* known = std::getenv("KFORGE_TORCH_COMPILE_SUPPORT");
  return known != nullptr && *known != '\0' && python == known;
}

std::string torch_compile_support(double timeout_s) {
  static std::mutex mutex;
  static std::optional<std::string> answered;
  std::lock_guard<std::mutex> lock(mutex);
  if (answered) return *answered;
  const std::string python = torch_python();
  if (compile_support_handed_down(python)) return *(answered = "");
  const Finished probe = run_captured({python, "-m", "kforge_torch", "compile-support"},
                                      torch_environment(inherited_environment()), timeout_s);
  if (probe.timed_out || !probe.status.exited || probe.status.exit_code != 0) {
    throw Error("asking " + python + " whether torch.compile works failed (" +
                (probe.timed_out ? "no answer in " + std::to_string(int(timeout_s)) + " s"
                                 : probe.status.describe()) +
                "): " + last_line(probe.err));
  }
  try {
    const json answer = json::parse(probe.out);
    answered = answer.at("available").get<bool>() ? "" : answer.at("why").get<std::string>();
  } catch (const json::exception& e) {
    throw Error(python + " -m kforge_torch compile-support printed no valid answer (" +
                std::string(e.what()) + ")");
  }
  return *answered;
}

Task task_from_derived(const json& derived, const std::string& source_path) {
  const std::string where = source_path;
  if (derived.value("format", "") != "kforge-torch-task") {
    throw Error(where + ": not a derived task (format is not \"kforge-torch-task\")");
  }
  if (derived.value("version", 0) != kDerivedVersion) {
    throw Error(where + ": derived task version " + std::to_string(derived.value("version", 0)) +
                " (this kforge reads version " + std::to_string(kDerivedVersion) + ")");
  }
  Task task;
  with_context(where, [&] {
    task.name = field(derived, "name", where).get<std::string>();
    task.family = derived.value("family", "");
    task.description = derived.value("description", "");
    task.signature = field(derived, "signature", where).get<Signature>();
    task.workloads = field(derived, "workloads", where).get<std::vector<Workload>>();
    task.tolerance = field(derived, "tolerance", where).get<Tolerance>();
    task.flops_formula = derived.value("flops", "");
    task.bytes_formula = derived.value("bytes", "");
    if (derived.contains("distributions")) {
      task.distributions = derived.at("distributions").get<std::vector<std::string>>();
    }
    // A gemm_epilogue or grouped_conv_transpose match's chain, read from the module's graph
    // (gemm_match.py, conv_match.py).
    if (derived.contains("epilogue") && !derived.at("epilogue").is_null()) {
      task.epilogue = derived.at("epilogue").get<std::vector<std::string>>();
      parse_epilogue(task.epilogue, task.signature);  // a bad chain is a clear error now
    }
    return 0;
  });
  task.source_path = source_path;
  task.reference_paths["torch"] = field(derived, "problem", where).get<std::string>();
  task.torch_reference = derived;
  validate_task(task, where);
  check_torch_reference(task);
  return task;
}

void check_torch_reference(const Task& task) {
  validate_torch_section(task, field(task.torch_reference, "torch", task.source_path),
                         task.source_path);
}

json derived_from_toml(const Task& task, const json& torch_table, const std::string& problem_path) {
  json derived = {{"format", "kforge-torch-task"},
                  {"version", kDerivedVersion},
                  {"problem", problem_path}};
  json torch_section = torch_table;
  // Kept in [torch] in TOML, top-level fields of the derived JSON.
  for (const char* key : {"problem_sha256", "family_misses", "input_rules"}) {
    if (torch_section.contains(key)) {
      derived[key] = torch_section.at(key);
      torch_section.erase(key);
    }
  }
  derived["torch"] = torch_section;
  Task copy = task;
  copy.torch_reference = derived;
  return derived_json(copy);
}

Task load_torch_task(const std::string& path) {
  return task_from_derived(derive_torch_task(path), path);
}

json derived_json(const Task& task) {
  if (!task.has_torch_reference()) throw Error(task.source_path + ": not a PyTorch task");
  json derived = task.torch_reference;
  derived["name"] = task.name;
  derived["family"] = task.family;
  derived["signature"] = task.signature;
  derived["workloads"] = task.workloads;
  derived["tolerance"] = task.tolerance;
  derived["distributions"] = task.distributions;
  derived["flops"] = task.flops_formula;
  derived["bytes"] = task.bytes_formula;
  if (!task.epilogue.empty()) {
    derived["epilogue"] = task.epilogue;
  } else {
    derived.erase("epilogue");
  }
  return derived;
}

}  // namespace kforge

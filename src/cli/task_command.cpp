#include "cli/task_command.h"

#include "cli/reference_check.h"
#include "cli/reference_check_batch.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "task/task_loader.h"
#include "task/torch_task.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// A native task as JSON: what load_task read, with every workload's bound shapes.
nlohmann::json task_json(const Task& task) {
  nlohmann::json workloads = nlohmann::json::array();
  for (const Workload& workload : task.workloads) {
    nlohmann::json shapes = nlohmann::json::object();
    for (const TensorSpec& tensor : task.signature.tensors) shapes[tensor.name] = bind_shape(tensor, workload);
    workloads.push_back({{"name", workload.name}, {"timed", workload.timed}, {"dims", workload.dims},
                         {"shapes", shapes}, {"bytes", bytes_per_call(task, workload)}});
  }
  return {{"name", task.name},         {"family", task.family},
          {"description", task.description}, {"signature", task.signature},
          {"workloads", workloads},    {"tolerance", task.tolerance},
          {"distributions", task.distributions}, {"references", task.reference_paths},
          {"flops", task.flops_formula}, {"bytes", task.bytes_formula}};
}

}  // namespace

void add_task_command(CLI::App& app, TaskCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "task", "Show the task kforge makes of a file: a PyTorch problem (.py, KernelBench format) "
              "is derived into a task printed as TOML, to keep and edit");
  command->add_option("file", options.path, "a problem .py file or a task.toml");
  command->add_option("-o,--output", options.output_path,
                      "write the derived task TOML to this file instead of printing it");
  command->add_flag("--json", options.json, "print JSON (the derived task, or what was read)");
  command->add_flag("--check", options.check,
                    "run the reference on a backend as `kforge optimize` does before its search "
                    "(expected outputs of every workload, their self-test, a quick timing on the "
                    "timed workload) and print what it found; no search, nothing written");
  command->add_option("--backend", options.backend, "with --check: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--device", options.device, "with --check: the device index")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--baseline", options.baseline,
                      "with --check: eager, or compile (also torch.compile the module and time it)")
      ->check(CLI::IsMember({"eager", "compile"}));
  command->add_option("--check-batch", options.batch_path,
                      "check the references of many tasks on one set of workers (the torch "
                      "reference worker starts once): a JSON file {\"checks\": [{\"label\", "
                      "\"task\", \"report\"}, ...]}; each check's JSON goes to its report; "
                      "no FILE");
  command->add_option("--report", options.report_path,
                      "with --check: also write the check's JSON to this file, {\"ok\": false, "
                      "\"error\"} when it fails");
}

namespace {

int run_check(const TaskCommandOptions& options) {
  ReferenceCheckOptions check_options;
  check_options.backend = options.backend;
  check_options.device = options.device;
  check_options.baseline = options.baseline;
  ReferenceCheck check;
  try {
    check = check_reference(load_task(options.path), check_options);
  } catch (const std::exception& e) {
    if (!options.report_path.empty()) {
      write_file_atomically(options.report_path,
                            failed_check_json(options.path, e.what()).dump(2) + "\n");
    }
    throw;
  }
  const nlohmann::json json = to_json(check);
  if (!options.report_path.empty()) {
    write_file_atomically(options.report_path, json.dump(2) + "\n");
  }
  if (options.json) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << render_reference_check(check);
  }
  return 0;
}

int run_check_batch_command(const TaskCommandOptions& options) {
  if (!options.path.empty() || options.check || !options.output_path.empty() ||
      !options.report_path.empty() || options.json) {
    throw Error("--check-batch takes no FILE and no --check, -o, --report or --json: each "
                "check's report path is in the batch file");
  }
  ReferenceCheckOptions check_options;
  check_options.backend = options.backend;
  check_options.device = options.device;
  check_options.baseline = options.baseline;
  const std::vector<BatchCheck> checks = read_check_batch(options.batch_path);
  const int ran = run_check_batch(checks, check_options, [](const std::string& line) {
    std::cout << line << std::flush;
    if (line.empty() || line.back() != '\n') std::cout << "\n";
  });
  std::cout << fmt::format("{} of {} reference(s) ran; reports as the batch file names them\n",
                           ran, checks.size());
  return 0;
}

}  // namespace

int run_task_command(const TaskCommandOptions& options) {
  if (!options.batch_path.empty()) return run_check_batch_command(options);
  if (options.path.empty()) {
    throw Error("kforge task: expected a file (a problem .py or a task.toml), or --check-batch");
  }
  if (fs::is_directory(options.path)) {
    throw Error(options.path + " is a folder; expected a PyTorch problem file (.py) or a "
                               "task.toml (kforge suite takes folders)");
  }
  if (options.check) {
    if (!options.output_path.empty()) throw Error("--check and -o: choose one");
    return run_check(options);
  }
  const Task task = load_task(options.path);
  if (!task.has_torch_reference()) {
    if (!options.output_path.empty()) {
      throw Error(options.path + " is a TOML task already; -o writes the task of a PyTorch problem");
    }
    if (options.json) {
      std::cout << task_json(task).dump(2) << "\n";
    } else {
      std::cout << fmt::format("task '{}' (family {}): {} tensors, {} workloads\n", task.name,
                               task.family, task.signature.tensors.size(), task.workloads.size());
    }
    return 0;
  }
  if (options.json) {
    std::cout << derived_json(task).dump(2) << "\n";
    return 0;
  }
  if (options.output_path.empty()) {
    // Printed text may be saved anywhere: its problem path stays absolute.
    std::cout << torch_task_toml(task, "");
    return 0;
  }
  const fs::path out = fs::absolute(options.output_path).lexically_normal();
  std::error_code ec;
  if (fs::equivalent(out, task.reference_paths.at("torch"), ec) ||
      fs::equivalent(out, options.path, ec)) {
    throw Error("-o " + options.output_path + ": that is the problem file itself; name another "
                "file for the task (e.g. " + fs::path(options.path).stem().string() + "/task.toml)");
  }
  if (fs::exists(out) && out.extension() != ".toml") {
    throw Error("-o " + options.output_path + ": refusing to replace an existing file that is not "
                "a .toml task");
  }
  fs::create_directories(out.parent_path(), ec);
  write_file_atomically(out, torch_task_toml(task, out.parent_path().string()));
  std::cerr << "kforge: wrote " << options.output_path << " (family: "
            << (task.family.empty() ? "none matched" : task.family) << ")\n";
  return 0;
}

}  // namespace kforge::cli

#include "task/task_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "backends/backend.h"
#include "common/error.h"
#include "common/hash.h"
#include "core/epilogue.h"
#include "core/expression.h"
#include "task/policy_table.h"
#include "task/torch_task.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// Carries the file name so that every message says where the problem is.
class FieldReader {
 public:
  explicit FieldReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(path_ + ": " + field + ": " + what);
  }

  std::string string(const toml::table& table, const std::string& key, const std::string& field,
                     bool required = true, const std::string& fallback = "") const {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
      if (required) fail(field, "missing (expected a string)");
      return fallback;
    }
    auto value = node->value<std::string>();
    if (!value) fail(field, "expected a string");
    return *value;
  }

  const toml::array& array_of_tables(const toml::table& table, const std::string& key,
                                     bool required) const {
    static const toml::array empty;
    const toml::node* node = table.get(key);
    if (node == nullptr) {
      if (required) fail(key, "missing (expected an array of tables, [[" + key + "]])");
      return empty;
    }
    const toml::array* array = node->as_array();
    if (array == nullptr || !array->is_array_of_tables()) {
      fail(key, "expected an array of tables ([[" + key + "]])");
    }
    return *array;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string indexed(const std::string& key, size_t index) {
  return key + "[" + std::to_string(index) + "]";
}

DType read_dtype(const FieldReader& reader, const toml::table& table, const std::string& field) {
  std::string name = reader.string(table, "dtype", field + ".dtype");
  try {
    return parse_dtype(name);
  } catch (const Error& e) {
    reader.fail(field + ".dtype", e.what());
  }
}

/// Fails on a key of an [[inputs]]/[[outputs]]/[[scalars]] entry that kforge does not read. A
/// top-level key written below such a header belongs to that entry in TOML, and would otherwise
/// be ignored without a word (it happened: `distributions` under the last [[scalars]]).
void reject_unknown_keys(const FieldReader& reader, const toml::table& table,
                         const std::string& field, const std::vector<std::string>& allowed) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    std::string expected;
    for (const std::string& a : allowed) expected += (expected.empty() ? "" : ", ") + a;
    reader.fail(field + "." + name,
                "unknown key (expected " + expected +
                    "); a top-level key written below a [[...]] header belongs to that entry: "
                    "move it above the first [[...]] header");
  }
}

std::vector<TensorSpec> read_tensors(const FieldReader& reader, const toml::table& root,
                                     const std::string& key, TensorRole role) {
  std::vector<TensorSpec> tensors;
  const toml::array& array = reader.array_of_tables(root, key, true);
  for (size_t i = 0; i < array.size(); ++i) {
    const toml::table& table = *array[i].as_table();
    std::string field = indexed(key, i);
    reject_unknown_keys(reader, table, field, {"name", "dtype", "shape", "strided", "provided"});
    TensorSpec spec;
    spec.role = role;
    spec.name = reader.string(table, "name", field + ".name");
    spec.dtype = read_dtype(reader, table, field);
    const toml::array* shape = table.get_as<toml::array>("shape");
    // [] is a 0-d tensor (one element): a PyTorch loss such as KernelBench 95's returns one.
    if (shape == nullptr) {
      reader.fail(field + ".shape", "expected an array of dimension names or integers ([] for a "
                                    "0-d tensor)");
    }
    for (const toml::node& dim : *shape) {
      if (auto text = dim.value<std::string>()) {
        spec.shape.push_back(*text);
      } else if (auto number = dim.value<int64_t>(); number && *number > 0) {
        spec.shape.push_back(std::to_string(*number));
      } else {
        reader.fail(field + ".shape", "expected dimension names or positive integers");
      }
    }
    if (const toml::node* strided = table.get("strided")) {
      auto value = strided->value_exact<bool>();
      if (!value) reader.fail(field + ".strided", "expected true or false");
      if (role != TensorRole::input) {
        reader.fail(field + ".strided", "only inputs may be strided (outputs are always compact)");
      }
      spec.strided = *value;
    }
    if (const toml::node* provided = table.get("provided")) {
      auto value = provided->value_exact<bool>();
      if (!value) reader.fail(field + ".provided", "expected true or false");
      if (role != TensorRole::input) {
        reader.fail(field + ".provided", "only inputs may be provided by the reference");
      }
      spec.provided = *value;
    }
    tensors.push_back(std::move(spec));
  }
  return tensors;
}

std::vector<ScalarSpec> read_scalars(const FieldReader& reader, const toml::table& root) {
  std::vector<ScalarSpec> scalars;
  const toml::array& array = reader.array_of_tables(root, "scalars", false);
  for (size_t i = 0; i < array.size(); ++i) {
    const toml::table& table = *array[i].as_table();
    std::string field = indexed("scalars", i);
    reject_unknown_keys(reader, table, field, {"name", "dtype", "value"});
    ScalarSpec spec;
    spec.name = reader.string(table, "name", field + ".name");
    spec.dtype = read_dtype(reader, table, field);
    auto value = table["value"].value<double>();
    if (!value) reader.fail(field + ".value", "missing or not a number");
    spec.value = *value;
    scalars.push_back(std::move(spec));
  }
  return scalars;
}

std::vector<Workload> read_workloads(const FieldReader& reader, const toml::table& root) {
  std::vector<Workload> workloads;
  const toml::array& array = reader.array_of_tables(root, "workloads", true);
  if (array.empty()) reader.fail("workloads", "expected at least one [[workloads]] entry");
  for (size_t i = 0; i < array.size(); ++i) {
    const toml::table& table = *array[i].as_table();
    std::string field = indexed("workloads", i);
    Workload workload;
    workload.name = reader.string(table, "name", field + ".name");
    for (const auto& [key, node] : table) {
      std::string name(key.str());
      if (name == "name") continue;
      if (name == "timed") {
        auto timed = node.value<bool>();
        if (!timed) reader.fail(field + ".timed", "expected true or false");
        workload.timed = *timed;
        continue;
      }
      auto value = node.value<int64_t>();
      if (!value || *value <= 0) {
        reader.fail(field + "." + name, "expected a positive integer dimension");
      }
      workload.dims[name] = *value;
    }
    workloads.push_back(std::move(workload));
  }
  return workloads;
}

Tolerance read_tolerance(const FieldReader& reader, const toml::table& root) {
  Tolerance tolerance;
  const toml::table* table = root.get_as<toml::table>("tolerance");
  if (table == nullptr) reader.fail("tolerance", "missing (expected a [tolerance] table)");
  auto rtol = (*table)["rtol"].value<double>();
  auto atol = (*table)["atol"].value<double>();
  if (!rtol || *rtol < 0) reader.fail("tolerance.rtol", "expected a non-negative number");
  if (!atol || *atol < 0) reader.fail("tolerance.atol", "expected a non-negative number");
  tolerance.rtol = *rtol;
  tolerance.atol = *atol;
  if (const toml::node* normalized = table->get("normalized")) {
    auto value = normalized->value<double>();
    if (!value || *value < 0) reader.fail("tolerance.normalized", "expected a non-negative number");
    tolerance.normalized = *value;
  }
  if (const toml::node* per_workload = table->get("workload_atol")) {
    const toml::table* atols = per_workload->as_table();
    if (atols == nullptr) {
      reader.fail("tolerance.workload_atol", "expected a table of workload name = atol");
    }
    for (const auto& [key, node] : *atols) {
      const std::string workload(key.str());
      auto value = node.value<double>();
      if (!value || *value < 0) {
        reader.fail("tolerance.workload_atol." + workload, "expected a non-negative number");
      }
      tolerance.workload_atol[workload] = *value;
    }
  }
  for (const auto& [key, node] : *table) {
    const std::string name(key.str());
    if (name != "rtol" && name != "atol" && name != "normalized" && name != "workload_atol") {
      reader.fail("tolerance." + name,
                  "unknown key (expected rtol, atol, normalized, workload_atol)");
    }
  }
  return tolerance;
}

// `precision`, `[fp32_model]` and `epilogue` (task.h). The epilogue's scalars are checked
// against the signature, so read the scalars first.
void read_precision_and_epilogue(const FieldReader& reader, const toml::table& root, Task& task) {
  task.precision = reader.string(root, "precision", "precision", false, "fp32");
  if (task.precision != "fp32" && task.precision != "tf32" && task.precision != "bf16") {
    reader.fail("precision", "'" + task.precision + "' is not a precision (expected \"fp32\", "
                             "\"tf32\" or \"bf16\")");
  }
  if (const toml::node* node = root.get("fp32_model")) {
    const toml::table* table = node->as_table();
    if (table == nullptr) reader.fail("fp32_model", "expected a table with `defines`");
    for (const auto& [key, item] : *table) {
      const std::string name(key.str());
      if (name == "defines") {
        const toml::table* defines = item.as_table();
        if (defines == nullptr || defines->empty()) {
          reader.fail("fp32_model.defines",
                      "expected a table of NAME = \"value\" (e.g. { KF_ACC = \"float\" })");
        }
        for (const auto& [define, value] : *defines) {
          auto text = value.value<std::string>();
          if (!text) reader.fail("fp32_model.defines." + std::string(define.str()), "expected a string");
          task.fp32_model_defines[std::string(define.str())] = *text;
        }
      } else if (name == "max_ratio") {
        auto ratio = item.value<double>();
        if (!ratio || !(*ratio >= 1.0)) {
          reader.fail("fp32_model.max_ratio", "expected a number >= 1");
        }
        task.precision_max_ratio = *ratio;
      } else {
        reader.fail("fp32_model." + name, "unknown key (expected defines, max_ratio)");
      }
    }
    if (task.fp32_model_defines.empty()) {
      reader.fail("fp32_model", "missing `defines` (the defines that make the reference fp32)");
    }
  }
  if (const toml::node* node = root.get("epilogue")) {
    const toml::array* chain = node->as_array();
    if (chain == nullptr) reader.fail("epilogue", "expected an array of op strings");
    for (const toml::node& item : *chain) {
      auto op = item.value<std::string>();
      if (!op) reader.fail("epilogue", "expected an array of op strings");
      task.epilogue.push_back(*op);
    }
    try {
      parse_epilogue(task.epilogue, task.signature);
    } catch (const Error& e) {
      reader.fail("epilogue", e.what());
    }
  }
}

std::vector<std::string> read_distributions(const FieldReader& reader, const toml::table& root) {
  // InputDistribution's names (worker/host_data.h, which this module does not include).
  static const std::set<std::string> kKnown = {"uniform", "normal", "heavy_tailed",
                                               "small",   "pareto", "spike"};
  const toml::node* node = root.get("distributions");
  if (node == nullptr) return Task{}.distributions;
  const toml::array* array = node->as_array();
  std::vector<std::string> names;
  if (array != nullptr) {
    for (const toml::node& item : *array) {
      auto name = item.value<std::string>();
      if (!name || !kKnown.contains(*name)) {
        reader.fail("distributions",
                    "expected names among \"uniform\", \"normal\", \"heavy_tailed\", "
                    "\"small\", \"pareto\", \"spike\"");
      }
      names.push_back(*name);
    }
  }
  if (names.empty()) reader.fail("distributions", "expected a non-empty array of names");
  return names;
}

std::map<std::string, std::string> read_references(const FieldReader& reader,
                                                   const toml::table& root) {
  const toml::table* table = root.get_as<toml::table>("reference");
  if (table == nullptr || table->empty()) {
    reader.fail("reference", "missing (expected a [reference] table with " +
                                 backends::name_list(backends::known_backend_names()) +
                                 " paths, or torch)");
  }
  std::vector<std::string> known = backends::known_backend_names();
  known.push_back("torch");  // a PyTorch problem file (task/torch_task.h), in any build
  std::map<std::string, std::string> paths;
  fs::path base = fs::path(reader.path()).parent_path();
  for (const auto& [key, node] : *table) {
    std::string backend(key.str());
    if (std::find(known.begin(), known.end(), backend) == known.end()) {
      reader.fail("reference." + backend,
                  "unknown reference (expected " + backends::name_list(known) +
                      ", a PyTorch problem file)");
    }
    auto relative = node.value<std::string>();
    if (!relative) reader.fail("reference." + backend, "expected a path string");
    fs::path full = base / *relative;
    if (!fs::exists(full)) {
      reader.fail("reference." + backend, "file '" + full.string() + "' does not exist");
    }
    paths[backend] = full.string();
  }
  return paths;
}

void check_unique_names(const FieldReader& reader, const Task& task) {
  std::set<std::string> names;
  for (const TensorSpec& t : task.signature.tensors) {
    if (!names.insert(t.name).second) reader.fail("inputs/outputs", "duplicate name '" + t.name + "'");
  }
  for (const ScalarSpec& s : task.signature.scalars) {
    if (!names.insert(s.name).second) reader.fail("scalars", "duplicate name '" + s.name + "'");
  }
  std::set<std::string> workload_names;
  for (const Workload& w : task.workloads) {
    if (!workload_names.insert(w.name).second) {
      reader.fail("workloads", "duplicate workload name '" + w.name + "'");
    }
  }
}

void check_bindings(const FieldReader& reader, Task& task) {
  for (size_t i = 0; i < task.workloads.size(); ++i) {
    for (const TensorSpec& tensor : task.signature.tensors) {
      try {
        bind_shape(tensor, task.workloads[i]);
      } catch (const Error& e) {
        reader.fail(indexed("workloads", i), e.what());
      }
    }
    for (const auto& [field, formula] :
         {std::pair{"flops", &task.flops_formula}, std::pair{"bytes", &task.bytes_formula}}) {
      if (formula->empty()) continue;
      double value = 0;
      try {
        value = evaluate_expression(*formula, task.workloads[i].dims);
      } catch (const Error& e) {
        reader.fail(field, e.what());
      }
      if (!(value >= 0)) {
        reader.fail(field, "is negative for workload '" + task.workloads[i].name + "'");
      }
    }
  }
  bool any_timed = false;
  for (const Workload& w : task.workloads) any_timed = any_timed || w.timed;
  if (!any_timed) {
    // Default: time the workload that moves the most bytes, the most realistic one given.
    Workload* largest = &task.workloads.front();
    for (Workload& w : task.workloads) {
      if (min_bytes_moved(task.signature, w) > min_bytes_moved(task.signature, *largest)) {
        largest = &w;
      }
    }
    largest->timed = true;
  }
}

// TOML values as JSON (tables -> objects), for the [torch] table's free-form module mapping.
nlohmann::json toml_to_json(const toml::node& node) {
  if (const toml::table* table = node.as_table()) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : *table) object[std::string(key.str())] = toml_to_json(item);
    return object;
  }
  if (const toml::array* array = node.as_array()) {
    nlohmann::json list = nlohmann::json::array();
    for (const toml::node& item : *array) list.push_back(toml_to_json(item));
    return list;
  }
  if (auto value = node.value_exact<std::string>()) return *value;
  if (auto value = node.value_exact<int64_t>()) return *value;
  if (auto value = node.value_exact<double>()) return *value;
  if (auto value = node.value_exact<bool>()) return *value;
  return nullptr;  // dates and times mean nothing here; the mapping check names the field
}

// A TOML task whose reference is a PyTorch problem carries the module mapping in [torch].
void read_torch_reference(const FieldReader& reader, const toml::table& root, Task& task) {
  const toml::table* torch_table = root.get_as<toml::table>("torch");
  auto problem = task.reference_paths.find("torch");
  if (problem == task.reference_paths.end()) {
    if (torch_table != nullptr) reader.fail("torch", "a [torch] table needs [reference] torch");
    return;
  }
  if (torch_table == nullptr) {
    reader.fail("torch", "missing: a task with [reference] torch needs the [torch] table that "
                         "maps it onto the module (write one with `kforge task PROBLEM.py -o FILE`)");
  }
  problem->second = fs::absolute(problem->second).lexically_normal().string();
  task.torch_reference = derived_from_toml(task, toml_to_json(*torch_table), problem->second);
  check_torch_reference(task);
}

}  // namespace

Task load_task(const std::string& path) {
  if (is_torch_problem(path)) return load_torch_task(path);
  if (!fs::exists(path)) throw Error(path + ": task file does not exist");
  FieldReader reader(path);
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream message;
    message << path << ":" << e.source().begin.line << ":" << e.source().begin.column
            << ": not valid TOML: " << e.description();
    throw Error(message.str());
  }
  // A misspelt top-level key (`distribution`, `flop`) would otherwise be dropped without a word
  // and its default used.
  static const std::vector<std::string> kTopLevel = {
      "name",    "family",  "description", "baseline",  "flops",     "bytes",     "distributions",
      "inputs",  "outputs", "scalars",     "workloads", "tolerance", "reference", "policy",
      "torch",   "precision", "fp32_model", "epilogue"};
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (std::find(kTopLevel.begin(), kTopLevel.end(), name) != kTopLevel.end()) continue;
    std::string expected;
    for (const std::string& k : kTopLevel) expected += (expected.empty() ? "" : ", ") + k;
    reader.fail(name, "unknown top-level key or table (expected one of " + expected + ")");
  }
  Task task;
  task.source_path = path;
  task.name = reader.string(root, "name", "name");
  task.family = reader.string(root, "family", "family");
  task.description = reader.string(root, "description", "description", false);
  task.baseline = reader.string(root, "baseline", "baseline", false, "reference");
  if (task.baseline != "reference") {
    reader.fail("baseline", "'" + task.baseline + "' is not supported (expected \"reference\")");
  }
  task.flops_formula = reader.string(root, "flops", "flops", false);
  task.bytes_formula = reader.string(root, "bytes", "bytes", false);
  task.distributions = read_distributions(reader, root);
  task.signature.tensors = read_tensors(reader, root, "inputs", TensorRole::input);
  std::vector<TensorSpec> outputs = read_tensors(reader, root, "outputs", TensorRole::output);
  task.signature.tensors.insert(task.signature.tensors.end(), outputs.begin(), outputs.end());
  task.signature.scalars = read_scalars(reader, root);
  task.workloads = read_workloads(reader, root);
  task.tolerance = read_tolerance(reader, root);
  read_precision_and_epilogue(reader, root, task);
  for (const auto& [workload, atol] : task.tolerance.workload_atol) {
    const bool known = std::any_of(task.workloads.begin(), task.workloads.end(),
                                   [&](const Workload& w) { return w.name == workload; });
    if (!known) {
      reader.fail("tolerance.workload_atol." + workload, "no workload of that name");
    }
  }
  task.reference_paths = read_references(reader, root);
  task.source_policy = parse_source_policy(root.get_as<toml::table>("policy"), path);
  check_unique_names(reader, task);
  check_bindings(reader, task);
  read_torch_reference(reader, root, task);
  for (size_t i = 0; i < task.signature.tensors.size(); ++i) {
    if (task.signature.tensors[i].provided && !task.has_torch_reference()) {
      reader.fail("inputs." + task.signature.tensors[i].name + ".provided",
                  "provided inputs need a PyTorch reference ([reference] torch = ...), whose "
                  "get_inputs() makes them; a native reference cannot");
    }
  }
  return task;
}

std::string task_hash(const Task& task) {
  std::ifstream file(task.source_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  for (const auto& [backend, path] : task.reference_paths) {
    std::ifstream reference(path, std::ios::binary);
    bytes << backend << reference.rdbuf();
  }
  // A PyTorch task is also what its derivation made of the module (signature, workloads, the
  // module mapping): a changed kforge derivation is another task.
  if (task.has_torch_reference()) {
    const nlohmann::json& derived = task.torch_reference;
    bytes << nlohmann::json(task.signature).dump() << nlohmann::json(task.workloads).dump()
          << derived.value("torch", nlohmann::json()).dump();
    // The chain read from the module's graph is part of what the kernels compute.
    if (!task.epilogue.empty()) bytes << nlohmann::json(task.epilogue).dump();
  }
  return sha256_hex(bytes.str()).substr(0, 16);
}

}  // namespace kforge

#include "cli/optimize_resume.h"

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "common/files.h"
#include "report/run_database.h"
#include "task/task_loader.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// What the search reads back must mean the same (Optimizer's kResumeFormat guards its part).
// 2: --eta, --fidelity, --devices and --workers. 3: --diversity-slots.
constexpr int kCommandFormat = 3;

nlohmann::json optional_json(const auto& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

template <typename T>
void read_optional(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  if (j.contains(key) && !j.at(key).is_null()) out = j.at(key).get<T>();
}

// An option a resumed run keeps as recorded: its flag and where command_to_json puts its value.
// Paths compare as absolute paths (the recorded memory and cache paths are absolute).
struct RecordedOption {
  const char* flag;
  const char* pointer;
  bool path = false;
};

// Every option of `kforge optimize` except the task, --resume, the budget limits (a resume may
// change them) and the presentation flags (--json, --explain).
const RecordedOption kRecordedOptions[] = {
    {"--backend", "/backend"},
    {"--memory", "/memory_path", true},
    {"--cache-dir", "/cache_dir", true},
    {"--cuda-arch", "/cuda_arch"},
    {"--device", "/device"},
    {"--devices", "/devices"},
    {"--workers", "/workers"},
    {"--steps", "/steps"},
    {"--proposals", "/proposals_per_step"},
    {"--diversity-slots", "/diversity_slots"},
    {"--seed", "/seed"},
    {"--temperature", "/temperature"},
    {"--eta", "/eta"},
    {"--fidelity", "/fidelity"},
    {"--compile-jobs", "/compile_jobs"},
    {"--final-rounds", "/final_rounds"},
    {"--profile", "/profile"},
    {"--baseline", "/baseline"},
    {"--baseline-cache", "/baseline_cache"},
    {"--generator", "/generator"},
    {"--language", "/language"},
    {"--llm-config", "/llm/config_path", true},
    {"--llm-prices", "/llm/prices_path", true},
    {"--llm-selector", "/llm/selector"},
    {"--replay", "/llm/replay_run", true},
    {"--repair-tries", "/repair_tries"},
    {"--policy", "/policy"},
    {"--ablate", "/ablate"},
    {"--weight-other-device", "/weights/other_device"},
    {"--weight-other-toolchain", "/weights/other_toolchain"},
    {"--weight-similar-family", "/weights/similar_family"},
    {"--weight-other-family", "/weights/other_family"},
    {"--similar-families", "/similar_families"},
};

std::string as_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

bool same_value(const nlohmann::json& given, const nlohmann::json& recorded, bool path) {
  if (!path || !given.is_string() || !recorded.is_string()) return given == recorded;
  auto absolute = [](const std::string& p) {
    return p.empty() ? p : fs::absolute(p).lexically_normal().string();
  };
  return absolute(given.get<std::string>()) == absolute(recorded.get<std::string>());
}

// Refuses, naming each, the options given on the command line with --resume whose value differs
// from the one `recorded` (meta 'command'): the resumed run would silently use the recorded one.
void refuse_changed_options(const OptimizeCommandOptions& given, const nlohmann::json& recorded,
                            const fs::path& dir) {
  const nlohmann::json now = command_to_json(given);
  std::vector<std::string> changed;
  for (const RecordedOption& option : kRecordedOptions) {
    if (!given.given_flags.count(option.flag)) continue;
    const nlohmann::json::json_pointer at(option.pointer);
    const nlohmann::json& value = now.at(at);
    if (std::string(option.flag) == "--backend" && value == "auto") continue;  // any backend
    const nlohmann::json was = recorded.contains(at) ? recorded.at(at) : nlohmann::json();
    if (!same_value(value, was, option.path)) {
      changed.push_back(fmt::format("{} {} differs from the run's recorded {}", option.flag,
                                    as_text(value), as_text(was)));
    }
  }
  if (given.given_flags.count("--run-dir") && !same_value(given.run_dir, dir.string(), true)) {
    changed.push_back("--run-dir " + given.run_dir + " is not the resumed run " + dir.string());
  }
  if (changed.empty()) return;
  std::string list;
  for (const std::string& line : changed) list += (list.empty() ? "" : "; ") + line;
  throw Error(fmt::format("--resume {}: {}; a resumed run keeps its recorded options except the "
                          "budget limits (start a new run to change them)",
                          dir.string(), list));
}

}  // namespace

nlohmann::json command_to_json(const OptimizeCommandOptions& o) {
  const search::OptimizeOptions& s = o.search;
  const memory::ProvenanceWeights& w = s.provenance_weights;
  return {{"format", kCommandFormat},
          {"task_path", o.task_path.empty() ? "" : fs::absolute(o.task_path).string()},
          {"backend", o.backend},
          {"memory_path", o.memory_path},
          {"cache_dir", o.cache_dir},
          {"cuda_arch", o.cuda_arch},
          {"device", o.device},
          {"devices", o.devices},
          {"workers", o.workers},
          {"profile", o.profile},
          {"baseline", o.baseline},
          {"baseline_cache", o.baseline_cache},
          {"generator", o.generator},
          {"language", o.language},
          {"llm",
           {{"config_path", o.llm.config_path},
            {"prices_path", o.llm.prices_path},
            {"replay_run", o.llm.replay_run},
            {"selector", o.llm.selector}}},
          {"policy", o.policy},
          {"ablate", o.ablate},
          {"similar_families", o.similar_families},
          {"steps", s.steps},
          {"proposals_per_step", s.proposals_per_step},
          {"diversity_slots", s.diversity_slots},
          {"seed", s.seed},
          {"temperature", s.temperature},
          {"compile_jobs", s.compile_jobs},
          {"final_rounds", o.evaluation.final_rounds},
          {"repair_tries", s.repair_tries},
          {"eta", s.eta},
          {"fidelity", o.fidelity},
          {"weights",
           {{"other_device", w.other_device},
            {"other_toolchain", w.other_toolchain},
            {"similar_family", w.similar_family},
            {"other_family", w.other_family}}},
          {"budget",
           {{"max_wall_s", optional_json(s.budget.max_wall_s)},
            {"max_device_s", optional_json(s.budget.max_device_s)},
            {"max_candidates", optional_json(s.budget.max_candidates)},
            {"max_cost_usd", optional_json(s.budget.max_cost_usd)}}}};
}

OptimizeCommandOptions command_from_json(const nlohmann::json& j, const std::string& source) {
  return with_context(source + ": meta 'command'", [&] {
    if (j.value("format", 0) != kCommandFormat) {
      throw Error("format " + j.value("format", nlohmann::json()).dump() + " (this kforge reads " +
                  std::to_string(kCommandFormat) + ")");
    }
    OptimizeCommandOptions o;
    o.task_path = j.at("task_path").get<std::string>();
    o.backend = j.at("backend").get<std::string>();
    o.memory_path = j.at("memory_path").get<std::string>();
    o.cache_dir = j.at("cache_dir").get<std::string>();
    o.cuda_arch = j.at("cuda_arch").get<std::string>();
    o.device = j.at("device").get<int>();
    o.devices = j.at("devices").get<std::vector<int>>();
    o.workers = j.at("workers").get<int>();
    o.profile = j.at("profile").get<std::string>();
    // Recorded since --baseline existed; an older run was an eager one.
    o.baseline = j.value("baseline", "eager");
    o.baseline_cache = j.value("baseline_cache", "use");
    o.generator = j.at("generator").get<std::string>();
    // Recorded since --language existed; an older run wrote native kernels (auto was native then).
    o.language = j.value("language", "native");
    const nlohmann::json& llm = j.at("llm");
    o.llm.config_path = llm.at("config_path").get<std::string>();
    o.llm.prices_path = llm.at("prices_path").get<std::string>();
    o.llm.replay_run = llm.at("replay_run").get<std::string>();
    o.llm.selector = llm.at("selector").get<std::string>();
    o.policy = j.at("policy").get<std::string>();
    o.ablate = j.at("ablate").get<std::vector<std::string>>();
    o.similar_families = j.at("similar_families").get<std::vector<std::string>>();
    search::OptimizeOptions& s = o.search;
    s.steps = j.at("steps").get<int>();
    s.proposals_per_step = j.at("proposals_per_step").get<int>();
    s.diversity_slots = j.at("diversity_slots").get<int>();
    s.seed = j.at("seed").get<uint64_t>();
    s.temperature = j.at("temperature").get<double>();
    s.compile_jobs = j.at("compile_jobs").get<int>();
    o.evaluation.final_rounds = j.at("final_rounds").get<int>();
    s.repair_tries = j.at("repair_tries").get<int>();
    s.eta = j.at("eta").get<double>();
    o.fidelity = j.at("fidelity").get<std::string>();
    const nlohmann::json& w = j.at("weights");
    s.provenance_weights.other_device = w.at("other_device").get<double>();
    s.provenance_weights.other_toolchain = w.at("other_toolchain").get<double>();
    s.provenance_weights.similar_family = w.at("similar_family").get<double>();
    s.provenance_weights.other_family = w.at("other_family").get<double>();
    const nlohmann::json& b = j.at("budget");
    read_optional(b, "max_wall_s", s.budget.max_wall_s);
    read_optional(b, "max_device_s", s.budget.max_device_s);
    read_optional(b, "max_candidates", s.budget.max_candidates);
    read_optional(b, "max_cost_usd", s.budget.max_cost_usd);
    return o;
  });
}

ResumePlan plan_resume(const OptimizeCommandOptions& given) {
  const fs::path dir = fs::absolute(given.resume_dir).lexically_normal();
  if (!fs::is_directory(dir)) throw Error("--resume " + dir.string() + ": no such run directory");
  const fs::path db_path = dir / "run.sqlite";
  if (!fs::exists(db_path)) {
    throw Error("--resume " + dir.string() + ": not a kforge run directory (no run.sqlite; runs "
                "made before kforge recorded one cannot be resumed)");
  }
  std::unique_ptr<report::RunDatabase> db = report::RunDatabase::open(db_path);
  const std::optional<nlohmann::json> command = db->meta("command");
  if (!command) {
    throw Error("--resume " + dir.string() + ": " + db_path.string() +
                " records no 'kforge optimize' command (not a run this kforge can resume)");
  }
  ResumePlan plan;
  plan.options = command_from_json(*command, db_path.string());
  const std::string status = db->meta("status").value_or("running").get<std::string>();
  if (status == "finished" && fs::exists(dir / "result.json")) {
    plan.complete = true;
    plan.result = nlohmann::json::parse(read_file(dir / "result.json"));
    return plan;
  }
  // The task: the one given, else the file the run was started from; either must be the task
  // the run recorded.
  const std::string recorded_hash = db->meta("task_hash").value_or("").get<std::string>();
  const std::string task_path = given.task_path.empty() ? plan.options.task_path : given.task_path;
  if (!fs::exists(task_path)) {
    throw Error("--resume " + dir.string() + ": the run's task file " + task_path +
                " is gone; give the task file after 'optimize'");
  }
  const std::string hash = task_hash(load_task(task_path));
  if (hash != recorded_hash) {
    throw Error("--resume " + dir.string() + ": the run was made for task '" +
                db->meta("task").value_or("?").get<std::string>() + "' (task hash " +
                recorded_hash + "), but " + task_path + " has task hash " + hash +
                " (another task, or the task file changed since)");
  }
  plan.options.task_path = task_path;
  plan.options.resume_dir = dir.string();
  plan.options.run_dir = dir.string();
  plan.options.json = given.json;
  plan.options.search.explain = given.search.explain;
  plan.options.search.resume = true;
  // Limits given with --resume replace the recorded ones (a run may be given more room).
  const search::BudgetLimits& limits = given.search.budget;
  search::BudgetLimits& budget = plan.options.search.budget;
  if (limits.max_wall_s) budget.max_wall_s = limits.max_wall_s;
  if (limits.max_device_s) budget.max_device_s = limits.max_device_s;
  if (limits.max_candidates) budget.max_candidates = limits.max_candidates;
  if (limits.max_cost_usd) budget.max_cost_usd = limits.max_cost_usd;
  // The other options are part of the recorded search (the journal replays it, the step count
  // included): one given again must say the same.
  refuse_changed_options(given, *command, dir);
  // Wall time and cost of earlier sessions are not replayed candidate by candidate: a limit they
  // already spent would stop the resumed search before its first recorded candidate and replace
  // the run's summary with an empty one. Refuse it before anything is written.
  const nlohmann::json spent = db->meta("spent").value_or(nlohmann::json::object());
  const double spent_wall_s = spent.value("wall_s", 0.0);
  const double spent_cost_usd = spent.value("cost_usd", 0.0);
  if (budget.max_wall_s && *budget.max_wall_s <= spent_wall_s) {
    throw Error(fmt::format("--resume {}: the run already spent {:.1f} s of wall time, at or above "
                            "its limit of {:g} s; give a larger --max-wall-s to continue it",
                            dir.string(), spent_wall_s, *budget.max_wall_s));
  }
  if (budget.max_cost_usd && *budget.max_cost_usd <= spent_cost_usd) {
    throw Error(fmt::format("--resume {}: the run already spent ${:.4f}, at or above its limit of "
                            "${:.4f}; give a larger --max-cost-usd to continue it",
                            dir.string(), spent_cost_usd, *budget.max_cost_usd));
  }
  return plan;
}

}  // namespace kforge::cli

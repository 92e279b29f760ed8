#include "cli/optimize_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/epilogue.h"
#include "backends/backend.h"
#include "cli/commands.h"
#include "cli/optimize_baseline.h"
#include "cli/optimize_report.h"
#include "cli/optimize_resume.h"
#include "cli/worker_setup.h"
#include "common/error.h"
#include "common/files.h"
#include "report/memory_graph.h"
#include "report/run_database.h"
#include "report/run_html.h"
#include "common/paths.h"
#include "common/scratch_dir.h"
#include "evaluation/profiler.h"
#include "compile/toolchain_compiler.h"
#include "generation/templates_generator.h"
#include "memory/sqlite_store.h"
#include "report/summary.h"
#include "task/task_bundle.h"
#include "task/task_loader.h"
#include "report/solution_export.h"
#include "task/torch_task.h"
#include "worker/candidate_router.h"
#include "worker/worker_client.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// After this long without an answer from the reference worker the user is told that kforge is
// waiting, and for how long it will: a reference takes milliseconds to seconds per request, and
// half a minute of silence already looks like a hang.
constexpr double kReferenceSlowNoticeS = 30.0;

// Ctrl-C: the first press stops the search at the next candidate boundary (and cancels LLM
// requests in flight); the second skips the final timing; the third ends the process.
std::atomic<int> g_interrupts{0};
std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  const int presses = g_interrupts.fetch_add(1) + 1;
  g_interrupted.store(true);
  // Only async-signal-safe calls here: write(2), signal(2).
  const char* message =
      presses == 1 ? "\nkforge: Ctrl-C: stopping after the candidate in flight (again: skip the "
                     "final timing)\n"
                   : "\nkforge: Ctrl-C again: skipping the final timing (again: quit now)\n";
  ssize_t ignored = ::write(STDERR_FILENO, message, std::strlen(message));
  (void)ignored;
  if (presses >= 2) std::signal(SIGINT, SIG_DFL);
}

// Installs on_interrupt for SIGINT while it lives.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction action = {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &previous_, nullptr); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_ = {};
};

// Prints a finished run's summary again (--resume of a complete run).
int report_complete(const OptimizeCommandOptions& given, const ResumePlan& plan) {
  std::cerr << "kforge: " << fs::absolute(given.resume_dir).string()
            << " is complete: nothing to resume; its summary:\n";
  if (given.json) {
    std::cout << plan.result.dump(2) << "\n";
  } else {
    std::cout << report::render_console_summary(plan.result, plan.result.value("task", "?"));
  }
  return plan.result.value("best", nlohmann::json()).is_null()
             ? static_cast<int>(ExitCode::not_all_correct)
             : 0;
}

}  // namespace

int run_optimize(const OptimizeCommandOptions& command_options) {
  const auto command_started = std::chrono::steady_clock::now();
  // Everything that can be wrong with the input is checked before the run directory is written.
  OptimizeCommandOptions options = command_options;
  options.search.budget.validate();
  search::validate_eta(options.search.eta);
  search::parse_fidelity(options.fidelity);
  const bool resume = !options.resume_dir.empty();
  if (resume) {
    ResumePlan plan = plan_resume(options);
    if (plan.complete) return report_complete(options, plan);
    options = plan.options;
  } else if (options.task_path.empty()) {
    throw Error("optimize: a task file is required (or --resume RUN_DIR to continue a run)");
  }
  const OptimizeCommandOptions recorded = options;  // before the defaults below are resolved
  options.search.policy = memory::parse_policy_kind(options.policy);
  options.search.fidelity = search::parse_fidelity(options.fidelity);
  options.search.ablations = memory::parse_ablations(options.ablate);
  if (options.search.policy != memory::PolicyKind::htam && !options.ablate.empty()) {
    throw Error("--ablate applies to --policy htam only (got --policy " + options.policy + ")");
  }
  if (!options.similar_families.empty()) {
    options.search.provenance_weights.similar_families.clear();
    for (const std::string& group : options.similar_families) {
      std::vector<std::string> families;
      std::stringstream list(group);
      for (std::string family; std::getline(list, family, ',');) families.push_back(family);
      options.search.provenance_weights.similar_families.push_back(families);
    }
  }
  options.search.provenance_weights.validate();
  Task task = load_task(options.task_path);  // its errors name the file and the field
  std::string why;
  if (!options.devices.empty()) options.device = options.devices.front();
  std::string backend = resolve_backend(options.backend, options.device, &why);
  if (options.backend == "auto" && !why.empty()) {
    std::cerr << "kforge: " << why << "; using the " << backend << " backend\n";
  }
  const std::vector<int> devices = candidate_devices(options, backend);
  if (!task.has_torch_reference() && !task.reference_paths.count(backend)) {
    throw Error(options.task_path + ": reference." + backend + ": missing (the task has no " +
                backend + " reference; choose another --backend)");
  }
  std::string root = resource_root();
  options.search.provenance_weights.validate_families(known_families(root));
  const bool use_llm = options.generator == "llm";
  if (!use_llm && options.generator != "templates") {
    throw Error("unknown generator '" + options.generator + "' (expected templates or llm)");
  }
  const KernelLanguage language = resolve_kernel_language(
      {options.language, options.generator, backend, backends::get_backend(backend).can.triton,
       task.has_torch_reference(), options.task_path});
  std::optional<llm::LlmConfig> llm_config;
  std::unique_ptr<generation::TemplatesGenerator> templates;
  if (use_llm) {
    // The LLM plane's own cap is the run's cost limit (default $1 with --generator llm).
    if (!options.search.budget.max_cost_usd) options.search.budget.max_cost_usd = 1.0;
    llm_config = resolve_llm_config(options.llm);  // no endpoint: a clear error, nothing written
  } else {
    if (language == KernelLanguage::triton) {
      // Built-in Triton families (kernels/triton/), each point written into the problem's
      // ModelNew: the shell comes from kforge's Python side, once per run.
      templates = std::make_unique<generation::TemplatesGenerator>(
          load_family_for(task, root, "triton"), to_string(element_dtype(task)),
          report::model_new_shell(derived_json(task)));
    } else {
      templates = std::make_unique<generation::TemplatesGenerator>(
          load_family_for(task, root, backend), to_string(element_dtype(task)));
      templates->set_task_defines(task_defines(task));
    }
    const auto largest = generation::largest_dims(task.workloads);
    for (const std::string& why : templates->set_task_dims(largest)) {
      std::cerr << "kforge: note: variant left out: " << why << "\n";
    }
  }

  compile::ToolchainOptions toolchain;
  toolchain.cache_dir = options.cache_dir.empty() ? artifact_cache_dir() : options.cache_dir;
  toolchain.include_dirs = kernel_include_dirs();
  toolchain.cuda_arch = options.cuda_arch;
  compile::ToolchainCompiler compiler(toolchain, &backends::toolchain_for);
  compiler.toolchain(backend);  // fails now, with a clear message, if the compiler is missing

  std::string memory_path =
      options.memory_path.empty() ? memory::default_memory_path().string() : options.memory_path;
  std::unique_ptr<memory::SqliteStore> store = memory::SqliteStore::open(
      memory_path, (fs::path(root) / "knowledge" / "seed.toml").string());
  if (const std::string added = memory::describe_seed_additions(*store); !added.empty()) {
    std::cerr << "kforge: note: " << added << "\n";
  }

  // Two workers on the same device: one runs only the reference (the oracle of expected
  // outputs), the other runs candidates, so no candidate shares an address space with the
  // right answer.
  WorkerConfigs configs = worker_configs(task, backend, options.device);
  // Anything short of bubblewrap leaves something unsandboxed: the note says what.
  if (configs.candidate.sandbox.mechanism != "bubblewrap") {
    std::cerr << "kforge: note: " << configs.candidate.sandbox.note << "\n";
  }
  std::vector<std::unique_ptr<worker::ProcessWorker>> workers;
  for (int device : devices) {
    worker::ProcessWorkerConfig config = configs.candidate;
    config.device_index = device;
    workers.push_back(std::make_unique<worker::ProcessWorker>(config));
  }
  worker::ProcessWorkerConfig& reference_config = configs.reference;
  // The reference worker is replaced when it dies (killed from outside, out of memory); the user
  // hears of it on the console and in events.jsonl, once the run directory exists.
  report::RunDirectory* restart_events = nullptr;
  reference_config.on_restart = [&restart_events](const std::string& cause) {
    std::cerr << "kforge: note: restarting the reference worker: " << cause << "\n";
    if (restart_events) {
      restart_events->append_event(
          {{"event", "worker_restarted"}, {"worker", "reference"}, {"cause", cause}});
    }
  };
  // A reference that hangs is stopped at the request's timeout (evaluation::EvaluationPolicy,
  // minutes); the user hears of the wait long before.
  reference_config.slow_notice_s = kReferenceSlowNoticeS;
  reference_config.on_slow = [](const std::string& request, double waited_s, double timeout_s) {
    std::cerr << fmt::format(
        "kforge: note: the reference has not answered its {} request for {:.0f} s; still "
        "waiting (it is stopped after {:.0f} s)\n",
        request, waited_s, timeout_s);
  };
  worker::ProcessWorker reference_worker(reference_config);
  // The reference worker starts (a torch worker imports torch; every reference worker measures
  // the device) on a thread of its own while the candidate workers start here: one wait rather
  // than their sum (on an H100, about 1.8 s and 0.4 s of every suite child's start). Nothing
  // touches reference_worker until joined; a start that failed is tried again, and reported
  // with its context, where the run first asks for the reference. The process itself is
  // started here: one started on the thread would be killed when the thread ends, where
  // bubblewrap's --die-with-parent watches the thread that started it.
  try {
    reference_worker.spawn();
  } catch (const std::exception&) {
    // Started (and reported) again by the run.
  }
  std::future<void> reference_starting = std::async(std::launch::async, [&reference_worker] {
    try {
      reference_worker.device_info();
    } catch (const std::exception&) {
      // Asked again (and reported) by the run.
    }
  });
  // A worker that cannot start (a device that does not exist) is an error before the run dir.
  for (size_t i = 0; i < workers.size(); ++i) {
    with_context(options.devices.empty() ? "candidate worker " + std::to_string(i)
                                         : "--devices: device " + std::to_string(devices[i]),
                 [&] { return workers[i]->device_info(); });
  }
  reference_starting.get();
  // --baseline compile: refused here, before the run directory, where this PyTorch cannot
  // compile; the baseline cache read (cli/optimize_baseline.h).
  const BaselineKind baseline_kind = parse_baseline_kind(options.baseline);
  const BaselineCacheMode baseline_cache = parse_baseline_cache_mode(options.baseline_cache);
  worker::DeviceInfo reference_device;
  if (baseline_kind == BaselineKind::compile && task.has_torch_reference()) {
    reference_device = with_context("torch reference worker",
                                    [&] { return reference_worker.device_info(); });
  }
  options.search.compile_baseline =
      prepare_compile_baseline(baseline_kind, baseline_cache, task, options.task_path,
                               reference_device, toolchain.cache_dir, std::cerr);
  if (options.search.compile_baseline.source == search::CompileBaselinePlan::Source::measure) {
    options.evaluation.baseline = BaselineKind::compile;
  }
  auto shutdown_workers = [&] {
    for (auto& w : workers) w->shutdown();
    reference_worker.shutdown();
  };
  std::vector<worker::Worker*> candidate_workers;
  for (auto& w : workers) candidate_workers.push_back(w.get());
  // A PyTorch task's candidates may also be Python (ModelNew sources): each device's candidate
  // worker becomes a router that sends those to a Python candidate worker of their own (started
  // at the first one), apart from the reference's process (worker/candidate_router.h).
  std::vector<std::unique_ptr<worker::ProcessWorker>> python_workers;
  std::vector<std::unique_ptr<worker::CandidateRouter>> routers;
  if (task.has_torch_reference()) {
    for (size_t i = 0; i < workers.size(); ++i) {
      worker::ProcessWorkerConfig python_config = configs.python_candidate;
      python_config.device_index = devices[i];
      python_workers.push_back(std::make_unique<worker::ProcessWorker>(python_config));
      routers.push_back(std::make_unique<worker::CandidateRouter>(*workers[i],
                                                                  *python_workers.back()));
      candidate_workers[i] = routers.back().get();
    }
  }
  std::optional<std::string> ncu;
  const bool profiles = backends::get_backend(backend).can.ncu_profiler;
  if (options.profile != "off" && profiles) ncu = evaluation::find_ncu();
  if (options.profile == "on" && !ncu) {
    throw Error(profiles ? "--profile on: Nsight Compute (ncu) was not found in $PATH, $CUDA_HOME/bin "
                           "or /usr/local/cuda/bin; install it or use --profile off"
                         : "--profile on needs " +
                               backends_that_can(&backends::Capabilities::ncu_profiler,
                                                 "that Nsight Compute profiles") +
                               " (Nsight Compute profiles GPU kernels)");
  }

  fs::path run_path = options.run_dir.empty()
                          ? report::RunDirectory::default_path("runs", task.name)
                          : fs::path(options.run_dir);
  report::RunDirectory run_dir(run_path, resume ? report::RunDirectory::Mode::resume
                                                : report::RunDirectory::Mode::create);
  run_path = run_dir.path();
  restart_events = &run_dir;
  // What earlier sessions spent on the model counts against the cost limit.
  double prior_cost_usd = 0.0;
  {
    std::unique_ptr<report::RunDatabase> db = report::RunDatabase::open(run_path / "run.sqlite");
    if (resume) {
      prior_cost_usd = db->meta("spent").value_or(nlohmann::json::object()).value("cost_usd", 0.0);
    } else {
      OptimizeCommandOptions to_record = recorded;
      to_record.backend = backend;
      to_record.memory_path = fs::absolute(memory_path).string();
      to_record.cache_dir = fs::absolute(toolchain.cache_dir).string();
      db->set_meta("command", command_to_json(to_record));
    }
  }
  std::unique_ptr<LlmSession> llm_session;
  InterruptGuard interrupt_guard;
  if (use_llm) {
    options.llm.budget_usd = std::max(*options.search.budget.max_cost_usd - prior_cost_usd, 1e-9);
    try {
      llm_session = std::make_unique<LlmSession>(options.llm, *llm_config, task, backend,
                                                 language, *store, run_dir, g_interrupted);
    } catch (...) {
      std::error_code ec;
      if (!resume) fs::remove_all(run_path, ec);
      throw;
    }
  }
  generation::Generator& generator =
      use_llm ? llm_session->generator() : static_cast<generation::Generator&>(*templates);
  if (!resume) {
    // What `kforge verify` needs to re-check the run elsewhere: the task and its references.
    write_task_bundle(task, run_path / "bundle");
    if (task.has_torch_reference() && is_torch_problem(options.task_path)) {
      // The problem as given, and the task kforge derived from it (a TOML `kforge task` reads).
      fs::copy_file(options.task_path, run_path / fs::path(options.task_path).filename());
      write_file_atomically(run_path / "task.toml", torch_task_toml(task, run_path.string()));
    } else {
      fs::copy_file(options.task_path, run_path / "task.toml");
    }
    nlohmann::json run_json = {{"task", task.name},
                               {"task_path", fs::absolute(options.task_path).string()},
                               {"task_hash", task_hash(task)},
                               {"backend", backend},
                               {"memory", memory_path},
                               {"policy", options.policy},
                               {"ablate", memory::to_string(options.search.ablations)},
                               {"artifact_cache", toolchain.cache_dir},
                               {"seed", options.search.seed},
                               {"steps", options.search.steps},
                               {"proposals_per_step", options.search.proposals_per_step},
                               {"diversity_slots", options.search.diversity_slots},
                               {"fidelity", options.fidelity},
                               {"eta", options.search.eta},
                               {"candidate_workers", devices.size()},
                               {"started", report::utc_now_iso8601()},
                               {"kforge_version", KFORGE_VERSION},
                               {"generator", generator.name()},
                               {"language", to_string(language)},
                               {"family", task.family},
                               {"baseline", options.baseline}};
    if (llm_session) run_json["llm"] = llm_session->describe();
    run_dir.write_json("run.json", run_json);
  }
  // The memory's graph for report.html (report/memory_graph.h): as the run found it, and again
  // at its end with the run's own evidence. A report is a view: a failure only warns.
  auto keep_memory_graph = [&] {
    try {
      run_dir.write_json(report::kMemoryGraphFile, report::memory_graph_json(
                                                       store->directions(backend), store->edges(),
                                                       backend));
    } catch (const std::exception& e) {
      std::cerr << "kforge: warning: " << report::kMemoryGraphFile << ": " << e.what() << "\n";
    }
  };
  keep_memory_graph();
  // report.html follows the run: written now, after candidates and rungs (at most every 2 s),
  // at the end (optimize_report.cpp) and when the run fails.
  auto refresh_report = [&run_path, last = std::chrono::steady_clock::time_point()](
                                  bool now) mutable {
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - last < std::chrono::seconds(2)) return;
    last = t;
    if (std::string problem = report::write_run_html(run_path); !problem.empty()) {
      std::cerr << "kforge: warning: " << problem << "\n";
    }
  };
  refresh_report(true);
  run_dir.set_event_listener([refresh_report](const nlohmann::json& event) mutable {
    const std::string kind = event.value("event", "");
    if (kind == "candidate" || kind == "full_rung" || kind == "step" || kind == "final") {
      refresh_report(kind == "final");
    }
  });
  std::cerr << "kforge: " << (resume ? "resuming " : "optimizing ") << task.name << " on "
            << backend << " -> " << run_path.string() << "\n";

  // A run that evaluated nothing leaves nothing behind; one that did keeps every candidate it
  // wrote (and its run database, so that --resume continues it), plus failed.txt saying why,
  // and never a result.json.
  auto record_failure = [&](const std::exception& e) {
    shutdown_workers();
    std::error_code ec;
    if (!resume && fs::is_empty(run_path / "candidates", ec)) {
      fs::remove_all(run_path, ec);
    } else {
      run_dir.write_text("failed.txt", std::string(e.what()) + "\n");
      run_dir.append_event({{"event", "failed"}, {"error", e.what()}});
      report::write_run_html(run_path);  // says it failed, and why
    }
  };
  // The real evaluator and compile pool over this run's workers (the seams the optimizer
  // measures and builds through); a task they refuse fails the run like run() would.
  search::RealPlane plane;
  try {
    plane = search::make_real_plane(task, backend, options.search, options.evaluation, compiler,
                                    candidate_workers, reference_worker);
  } catch (const std::exception& e) {
    record_failure(e);
    throw;
  }
  search::Optimizer optimizer(task, backend, options.search, *store, generator, *plane.evaluator,
                              *plane.pool, candidate_workers, reference_worker, run_dir,
                              [](const std::string& line) { std::cerr << line << "\n"; },
                              llm_session ? llm_session->selector() : nullptr);
  optimizer.set_interrupts(&g_interrupts);
  if (llm_session) optimizer.set_cost_meter([&] { return llm_session->cost_usd(); });
  std::unique_ptr<ScratchDir> profile_scratch;
  std::unique_ptr<evaluation::NcuProfiler> profiler;
  if (ncu && profiles) {
    profile_scratch = std::make_unique<ScratchDir>("kforge-profile");
    profiler =
        std::make_unique<evaluation::NcuProfiler>(configs.candidate, *ncu, *profile_scratch);
    // A best that is a ModelNew (--language cuda|triton) is profiled in the Python candidate
    // worker, its forward call alone counted (evaluation/profiler.h).
    if (task.has_torch_reference()) {
      profiler->set_python_worker(configs.python_candidate,
                                  options.evaluation.python_load_timeout_s);
    }
    optimizer.set_profiler(profiler.get());
  }
  search::OptimizeResult result;
  const std::chrono::duration<double> startup = std::chrono::steady_clock::now() - command_started;
  try {
    result = optimizer.run();
    result.startup_s += startup.count();
  } catch (const std::exception& e) {
    record_failure(e);
    throw;
  }
  shutdown_workers();
  keep_memory_graph();
  record_baselines(baseline_cache, task, reference_device, toolchain.cache_dir, result, std::cerr);

  return report_finished_run(result, {task.name, task.family, backend, generator.name(),
                                      to_string(language), devices, run_path, options.json},
                             llm_session.get(), run_dir);
}

}  // namespace kforge::cli

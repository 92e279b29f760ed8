#include "cli/commands.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/backend.h"
#include "cli/eval_command.h"
#include "cli/export_command.h"
#include "cli/memory_command.h"
#include "cli/optimize_command.h"
#include "cli/option_source.h"
#include "cli/suite_command.h"
#include "cli/task_command.h"
#include "cli/validators.h"
#include "cli/verify_command.h"
#include "common/error.h"
#include "common/secret_environment.h"
#include "search/scheduler.h"

namespace kforge::cli {
namespace {

// A budget limit: a positive number, refused with a message naming the flag otherwise.
CLI::Validator positive_limit() { return positive_number("leave it out for no limit"); }

// The task file: an existing file; a folder is refused pointing at its task.toml when it has one
// (`kforge optimize examples/softmax`).
CLI::Validator task_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code error;
        if (!std::filesystem::is_directory(path, error)) return CLI::ExistingFile(path);
        const std::filesystem::path inside = std::filesystem::path(path) / "task.toml";
        if (std::filesystem::is_regular_file(inside, error)) {
          return path + " is a directory; did you mean " + inside.string() + "?";
        }
        return path + " is a directory; expected a task file (TOML, e.g. "
               "examples/rmsnorm/task.toml) or a PyTorch problem file (.py)";
      },
      "TASK.toml|PROBLEM.py");
}

void add_optimize(CLI::App& app, OptimizeCommandOptions& options) {
  CLI::App* optimize = app.add_subcommand(
      "optimize", "Optimize one task: search, verify and time candidates, keep the best");
  optimize->add_option("task", options.task_path,
                       "Task file (TOML, e.g. examples/rmsnorm/task.toml) or PyTorch problem "
                       "file (.py, KernelBench format) (with --resume: "
                       "optional, checked to be the run's task)")
      ->check(task_file());
  optimize->add_option("--resume", options.resume_dir,
                       "Continue the run in this run directory (stopped by Ctrl-C, a crash or "
                       "kill -9) with its recorded seed and options; a finished run is reported "
                       "as complete")
      ->envname("KFORGE_RESUME");
  search::BudgetLimits& budget = options.search.budget;
  optimize
      ->add_option_function<double>(
          "--max-wall-s", [&budget](double v) { budget.max_wall_s = v; },
          "Stop the search after this many seconds of wall time (summed over resumed sessions)")
      ->envname("KFORGE_MAX_WALL_S")
      ->check(positive_limit());
  optimize
      ->add_option_function<double>(
          "--max-device-s", [&budget](double v) { budget.max_device_s = v; },
          "Stop the search after the worker spent this many seconds evaluating candidates")
      ->envname("KFORGE_MAX_DEVICE_S")
      ->check(positive_limit());
  optimize
      ->add_option_function<int>(
          "--max-candidates", [&budget](int v) { budget.max_candidates = v; },
          "Stop the search after this many candidates (expert hints and repairs included)")
      ->envname("KFORGE_MAX_CANDIDATES")
      ->check(whole_number(1, INT32_MAX, "leave it out for no limit").description("POSITIVE"));
  optimize
      ->add_option_function<double>(
          "--max-cost-usd,--llm-budget-usd", [&budget](double v) { budget.max_cost_usd = v; },
          "Stop once the LLM plane spent this many US dollars (default 1 with --generator llm)")
      ->envname("KFORGE_MAX_COST_USD")
      ->check(positive_limit());
  std::vector<std::string> backend_choices = backends::known_backend_names();
  backend_choices.insert(backend_choices.begin(), "auto");
  optimize->add_option("--backend", options.backend, "auto, " + backends::backend_names() +
                       (backends::absent_backends().empty() ? "" : " (in this build)"))
      ->envname("KFORGE_BACKEND")
      ->check(CLI::IsMember(backend_choices))
      ->capture_default_str();
  optimize->add_option("--run-dir", options.run_dir, "Where the run goes (default runs/<task>-<time>)")
      ->envname("KFORGE_RUN_DIR");
  optimize->add_option("--memory", options.memory_path,
                       "HTG memory file (default $XDG_DATA_HOME/kforge/memory.sqlite; "
                       "KFORGE_MEMORY_DB is still read)")
      ->envname("KFORGE_MEMORY");
  optimize->add_option("--cache-dir", options.cache_dir, "Compiled artifact cache")
      ->envname("KFORGE_CACHE_DIR");
  optimize->add_option("--cuda-arch", options.cuda_arch, "nvcc -arch for cuda candidates")
      ->envname("KFORGE_CUDA_ARCH")
      ->capture_default_str();
  CLI::Option* device_option =
      optimize->add_option("--device", options.device, "Device index for the worker");
  device_option->envname("KFORGE_DEVICE")
      ->check(whole_number(0, 1023))
      ->capture_default_str();
  optimize->add_option("--devices", options.devices,
                       "cuda: one candidate worker per listed device, e.g. 0,1 (each timing has "
                       "its device to itself; the reference runs on the first)")
      ->envname("KFORGE_DEVICES")
      ->delimiter(',')
      ->check(whole_number(0, 1023))
      ->excludes(device_option);  // one way to say where the workers run, never two
  optimize->add_option("--workers", options.workers,
                       "cpu: candidate worker processes evaluating a step's candidates "
                       "concurrently (they share the cores: timings are noisier above 1)")
      ->envname("KFORGE_WORKERS")
      ->check(whole_number(1, 64))
      ->capture_default_str();
  optimize->add_option("--steps", options.search.steps, "Search steps T after the expert hints")
      ->envname("KFORGE_STEPS")
      ->check(whole_number(0, 100000))
      ->capture_default_str();
  optimize->add_option("--proposals", options.search.proposals_per_step, "Candidates per step")
      ->envname("KFORGE_PROPOSALS")
      ->check(whole_number(1, 1000))
      ->capture_default_str();
  optimize->add_option("--diversity-slots", options.search.diversity_slots,
                       "Of each step's candidates, how many refine the fastest candidate of "
                       "another parallel decomposition than the best's (at most --proposals "
                       "minus 1 are; 0: all refine the best first)")
      ->envname("KFORGE_DIVERSITY_SLOTS")
      ->check(whole_number(0, 1000))
      ->capture_default_str();
  optimize->add_option("--seed", options.search.seed, "Seed of the policy's sampling")
      ->envname("KFORGE_SEED")
      ->check(whole_number(0, UINT64_MAX).description(""))  // --help: UINT, not its 20 digits
      ->capture_default_str();
  optimize->add_option("--temperature", options.search.temperature,
                       "Softmax temperature of the direction choice (higher explores more)")
      ->envname("KFORGE_TEMPERATURE")
      ->check(positive_number())
      ->capture_default_str();
  optimize->add_option("--eta", options.search.eta,
                       "Successive-halving ratio: the top ceil(n/eta) of each step's correct "
                       "candidates (by a lower confidence bound of the quick speedup) reach "
                       "rung 2; must be > 1")
      ->envname("KFORGE_ETA")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double eta = 0.0;
            try {
              eta = std::stod(text);
            } catch (const std::exception&) {
              return "'" + text + "' is not a number";
            }
            try {
              search::validate_eta(eta);
            } catch (const Error& e) {
              const std::string message = e.what();  // CLI11 names the flag itself
              return message.rfind("--eta: ", 0) == 0 ? message.substr(7) : message;
            }
            return "";
          },
          "ETA > 1"))
      ->capture_default_str();
  optimize->add_option("--fidelity", options.fidelity,
                       "ladder (quick rung for all, rung 2 for the promoted) or full (every "
                       "correct candidate at full fidelity: the flat baseline)")
      ->envname("KFORGE_FIDELITY")
      ->check(CLI::IsMember({"ladder", "full"}))
      ->capture_default_str();
  optimize->add_option("--compile-jobs", options.search.compile_jobs,
                       "Compile pool depth (0 = number of cores)")
      ->envname("KFORGE_COMPILE_JOBS")
      ->check(whole_number(0, 256))
      ->capture_default_str();
  optimize->add_option("--final-rounds", options.evaluation.final_rounds,
                       "Interleaved rounds of the final reference-vs-best timing")
      ->envname("KFORGE_FINAL_ROUNDS")
      ->check(whole_number(1, 1000))
      ->capture_default_str();
  optimize->add_option("--baseline", options.baseline,
                       "What speedups are reported against: eager (the reference as given; for "
                       "a PyTorch problem, the module under PyTorch eager) or compile (also "
                       "torch.compile of the module, timed with the best at the final rung; "
                       "PyTorch 2.x)")
      ->envname("KFORGE_BASELINE")
      ->check(CLI::IsMember({"eager", "compile"}))
      ->capture_default_str();
  optimize->add_option("--baseline-cache", options.baseline_cache,
                       "Cached torch.compile baselines (baselines.sqlite in the cache dir): use "
                       "(a cached compile-vs-eager ratio or compile failure stands in for "
                       "compiling again), refresh (measure and overwrite) or off")
      ->envname("KFORGE_BASELINE_CACHE")
      ->check(CLI::IsMember({"use", "refresh", "off"}))
      ->capture_default_str();
  optimize->add_option("--profile", options.profile,
                       "Profile the best kernel with Nsight Compute at the end: auto (cuda, when "
                       "ncu is found), on or off")
      ->envname("KFORGE_PROFILE")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  optimize->add_option("--generator", options.generator,
                       "What writes candidates: templates (built-in kernels, offline) or llm (an "
                       "OpenAI-compatible endpoint: KFORGE_LLM_BASE_URL, KFORGE_LLM_MODEL, "
                       "KFORGE_LLM_API_KEY)")
      ->envname("KFORGE_GENERATOR")
      ->check(CLI::IsMember({"templates", "llm"}))
      ->capture_default_str();
  optimize->add_option("--language", options.language,
                       "What candidates are written in: native (kforge_run kernels), cuda (a "
                       "KernelBench ModelNew whose kernels load_inline builds; on --backend cpu "
                       "its inline sources are C++) or triton (a ModelNew with Triton kernels, "
                       "cuda only); auto: cuda for a PyTorch problem with --generator llm, else "
                       "native")
      ->envname("KFORGE_LANGUAGE")
      ->check(CLI::IsMember({"auto", "native", "cuda", "triton"}))
      ->capture_default_str();
  optimize->add_option("--llm-config", options.llm.config_path,
                       "LLM config file (TOML; default $XDG_CONFIG_HOME/kforge/llm.toml if present)")
      ->envname("KFORGE_LLM_CONFIG");
  optimize->add_option("--llm-prices", options.llm.prices_path,
                       "Price table (default knowledge/llm_prices.toml)")
      ->envname("KFORGE_LLM_PRICES");
  optimize->add_option("--llm-selector", options.llm.selector,
                       "Who picks the strategy under a direction with --generator llm: llm or ucb1")
      ->envname("KFORGE_LLM_SELECTOR")
      ->check(CLI::IsMember({"auto", "llm", "ucb1"}))
      ->capture_default_str();
  optimize->add_option("--replay", options.llm.replay_run,
                       "Re-run an llm run without the network, answering from its recorded "
                       "responses (give its run directory)")
      ->envname("KFORGE_REPLAY")
      ->check(CLI::ExistingDirectory);
  optimize->add_option("--repair-tries", options.search.repair_tries,
                       "Times a failed llm candidate goes back to the model with its errors")
      ->envname("KFORGE_REPAIR_TRIES")
      ->check(whole_number(0, 20))
      ->capture_default_str();
  optimize->add_option("--policy", options.policy,
                       "htam (transition-attended memory), flat (flat evidence retrieval), "
                       "feedback (refine from the last result), oneshot (one generation, no "
                       "memory) or random")
      ->envname("KFORGE_POLICY")
      ->check(CLI::IsMember({"htam", "flat", "feedback", "oneshot", "random"}))
      ->capture_default_str();
  optimize->add_option("--ablate", options.ablate,
                       "Switch off parts of htam: hierarchy, local-memory, prefix (repeat or "
                       "comma-separate)")
      ->envname("KFORGE_ABLATE")
      ->delimiter(',')
      ->check(CLI::IsMember({"hierarchy", "local-memory", "prefix"}));
  memory::ProvenanceWeights& weights = options.search.provenance_weights;
  optimize->add_option("--weight-other-device", weights.other_device,
                       "Weight of evidence from another device")
      ->envname("KFORGE_WEIGHT_OTHER_DEVICE")
      ->check(number_in_range(0.0, 1.0))
      ->capture_default_str();
  optimize->add_option("--weight-other-toolchain", weights.other_toolchain,
                       "Weight of evidence from another compiler version")
      ->envname("KFORGE_WEIGHT_OTHER_TOOLCHAIN")
      ->check(number_in_range(0.0, 1.0))
      ->capture_default_str();
  optimize->add_option("--weight-similar-family", weights.similar_family,
                       "Weight of evidence from a similar operator family")
      ->envname("KFORGE_WEIGHT_SIMILAR_FAMILY")
      ->check(number_in_range(0.0, 1.0))
      ->capture_default_str();
  optimize->add_option("--weight-other-family", weights.other_family,
                       "Weight of evidence from an unrelated operator family")
      ->envname("KFORGE_WEIGHT_OTHER_FAMILY")
      ->check(number_in_range(0.0, 1.0))
      ->capture_default_str();
  optimize->add_option("--similar-families", options.similar_families,
                       "Groups of similar operator families, one comma-separated group per use "
                       "(replaces the default softmax,log_softmax,rmsnorm,rmsnorm_channels,"
                       "layernorm and gemv,gemv_t; each name a family with built-in kernels)")
      ->envname("KFORGE_SIMILAR_FAMILIES");
  optimize->add_flag("--explain", options.search.explain,
                     "Print why each candidate was chosen, promoted, pruned or rejected");
  optimize->add_flag("--json", options.json, "Print result.json instead of the summary");
}

// Levenshtein distance, for "did you mean" on mistyped subcommands.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Returns a message for an unknown subcommand in argv[1], or empty.
std::string unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string given = argv[1];
  std::string best;
  size_t best_distance = 3;  // suggest only close names
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == given) return "";
    size_t d = edit_distance(given, sub->get_name());
    if (d < best_distance) {
      best_distance = d;
      best = sub->get_name();
    }
  }
  return "unknown command '" + given + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)");
}

}  // namespace

int run_cli(int argc, char** argv) {
  // API keys leave the environment before any child is spawned or any candidate runs: no child
  // inherits them and /proc/<kforge>/environ no longer shows them (common/secret_environment.h).
  withdraw_secret_environment();
  // Output piped into `head` that has exited must not kill a run before it writes its files: a
  // write to the closed pipe then fails with EPIPE (std::cout goes bad) and the run goes on.
  // Children get SIGPIPE back at its default (process/subprocess.cpp).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app("kforge: makes compute kernels faster, proves them correct, measures them honestly",
               "kforge");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kforge ") + KFORGE_VERSION);
  OptimizeCommandOptions optimize;
  add_optimize(app, optimize);
  MemoryCommandOptions memory;
  add_memory_command(app, memory);
  SuiteCommandOptions suite;
  add_suite_command(app, suite, add_optimize);
  TaskCommandOptions task;
  add_task_command(app, task);
  EvalCommandOptions eval;
  add_eval_command(app, eval);
  VerifyCommandOptions verify;
  add_verify_command(app, verify);
  ExportCommandOptions export_options;
  add_export_command(app, export_options);
  if (std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
    std::cerr << "kforge: error: " << unknown << "\n";
    return static_cast<int>(ExitCode::usage);
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << name_environment_source(app, args, e.what())
              << "\nRun with --help for more information.\n";
    return static_cast<int>(ExitCode::usage);
  }
  try {
    if (app.got_subcommand("optimize")) {
      optimize.given_flags = options_on_command_line(*app.get_subcommand("optimize"), args);
      return run_optimize(optimize);
    }
    if (app.got_subcommand("memory")) return run_memory(*app.get_subcommand("memory"), memory);
    if (app.got_subcommand("suite")) return run_suite(suite, add_optimize);
    if (app.got_subcommand("task")) return run_task_command(task);
    if (app.got_subcommand("eval")) return run_eval_command(eval);
    if (app.got_subcommand("verify")) return run_verify_command(verify);
    if (app.got_subcommand("export")) return run_export_command(export_options);
  } catch (const UsageError& e) {
    std::cerr << "kforge: error: " << e.what() << "\nRun with --help for more information.\n";
    return static_cast<int>(ExitCode::usage);
  } catch (const std::exception& e) {
    std::cerr << "kforge: error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::error);
  }
  return static_cast<int>(ExitCode::usage);
}

}  // namespace kforge::cli

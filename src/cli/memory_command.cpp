#include "cli/memory_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "backends/backend.h"
#include "common/error.h"
#include "common/files.h"
#include "common/paths.h"
#include "memory/graph_dot.h"
#include "memory/knowledge.h"
#include "memory/sqlite_store.h"
#include "process/subprocess.h"

namespace kforge::cli {
namespace fs = std::filesystem;
namespace {

std::string memory_path(const MemoryCommandOptions& options) {
  return options.memory_path.empty() ? memory::default_memory_path().string() : options.memory_path;
}

fs::path seed_path() { return fs::path(resource_root()) / "knowledge" / "seed.toml"; }

std::unique_ptr<memory::SqliteStore> open_store(const MemoryCommandOptions& options) {
  auto store = memory::SqliteStore::open(memory_path(options), seed_path());
  const std::string added = memory::describe_seed_additions(*store);
  if (!added.empty()) std::cerr << "kforge: note: " << added << "\n";
  return store;
}

// True when the user named the memory file (--memory, KFORGE_MEMORY or KFORGE_MEMORY_DB) rather
// than leaving it at the per-user default, which the first use may create.
bool memory_named_by_user(const MemoryCommandOptions& options) {
  const char* legacy = std::getenv("KFORGE_MEMORY_DB");
  return !options.memory_path.empty() || (legacy && *legacy);
}

// For the subcommands that read an existing memory (show, graph, export, reset): a named file that
// does not exist is a typo, refused before SQLite creates it and its folders.
std::unique_ptr<memory::SqliteStore> open_existing_store(const MemoryCommandOptions& options) {
  const std::string path = memory_path(options);
  std::error_code error;
  if (memory_named_by_user(options) && !fs::exists(path, error)) {
    throw Error(path +
                ": no such file; expected an existing kforge memory database (check --memory or "
                "KFORGE_MEMORY; kforge optimize and kforge memory import create one)");
  }
  return open_store(options);
}

std::string stats_cells(const memory::Stats& s) {
  return fmt::format("{:>5} {:>5} {:>5} {:>5} {:>+8.3f} {:>+8.3f}", s.attempts, s.compile_successes,
                     s.correct_successes, s.successes, s.mean_log_gain, s.ema_log_gain);
}

constexpr const char* kStatsHeader = "    n  comp    ok  fast  mean_lg   ema_lg";

// What the columns of `memory show` mean (src/memory/htg.h, Stats), printed under the tables.
constexpr const char* kLegend =
    "columns: n attempts, comp compiled, ok passed the correctness gate, fast faster than the\n"
    "candidate it edited; mean_lg and ema_lg the mean and moving average of the natural log of\n"
    "that speedup over the ok attempts (+0.10 = 1.11x, -0.10 = 0.90x); prior the seed's utility\n"
    "on the same scale; lagJ n/mean the attempts of the edge's target J steps after its source,\n"
    "and their mean log speedup; last used in UTC. Recorded runs: kernels evaluated with\n"
    "`kforge eval --record` (speedup over the reference at the final rung, with its interval).\n";

// The recorded runs (`kforge eval --record`): one line per candidate, newest last.
void show_runs(memory::SqliteStore& store, const std::string& backend) {
  std::cout << fmt::format("\n{:<4} {:<5} {:<24} {:<14} {:>9} {:>22}  {:<24} {}\n", "run", "kind",
                           "task", "verdict", "median_ms", "speedup (CI)", "recorded", "kernel");
  for (const memory::RecordedRun& run : store.runs()) {
    if (!backend.empty() && run.provenance.backend != backend) continue;
    for (const memory::RecordedCandidate& c : run.candidates) {
      const std::string speedup = c.speedup
                                      ? fmt::format("{:.3f}x ({:.3f}-{:.3f})", *c.speedup,
                                                    c.ci_low.value_or(0.0), c.ci_high.value_or(0.0))
                                      : std::string("-");
      const std::string median = c.median_ms ? fmt::format("{:.4f}", *c.median_ms) : "-";
      std::cout << fmt::format("{:<4} {:<5} {:<24} {:<14} {:>9} {:>22}  {:<24} {}\n", run.id,
                               run.kind, run.task, c.verdict, median, speedup, run.created_at,
                               c.source_name);
    }
  }
}

int show(const MemoryCommandOptions& options) {
  auto store = open_existing_store(options);
  if (options.json) {
    std::cout << store->export_json().dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("memory {} (schema {}, {} evidence rows, {} recorded runs)\n\n",
                           store->path().string(), store->schema_version(), store->evidence_count(),
                           store->runs().size());
  std::cout << fmt::format("{:<24} {:<9} {:>6} {}  last used\n", "direction", "backends", "prior",
                           kStatsHeader);
  std::vector<memory::Direction> directions = store->directions(options.backend);
  for (const memory::Direction& d : directions) {
    std::string backends;
    for (const std::string& b : d.backends) backends += (backends.empty() ? "" : ",") + b;
    std::cout << fmt::format("{:<24} {:<9} {:>6.2f} {}  {}\n", d.id, backends, d.prior,
                             stats_cells(d.stats), d.stats.last_used);
  }
  std::cout << fmt::format("\n{:<36} {:<24} {}\n", "strategy", "direction", kStatsHeader);
  for (const memory::Direction& d : directions) {
    for (const memory::Strategy& s : store->strategies(d.id)) {
      if (!options.backend.empty() &&
          std::find(s.backends.begin(), s.backends.end(), options.backend) == s.backends.end()) {
        continue;
      }
      std::cout << fmt::format("{:<36} {:<24} {}\n", s.id, d.id, stats_cells(s.stats));
    }
  }
  auto listed = [&](const std::string& id) {
    for (const memory::Direction& d : directions) {
      if (d.id == id) return true;
    }
    return false;
  };
  std::cout << fmt::format("\n{:<50} {:>6}  {:>14} {:>14} {:>14}\n", "edge", "prior", "lag1 n/mean",
                           "lag2 n/mean", "lag3 n/mean");
  for (const memory::Edge& e : store->edges()) {
    if (!listed(e.from_direction) || !listed(e.to_direction)) continue;
    std::string lags;
    for (const memory::Stats& s : e.by_lag) {
      lags += fmt::format(" {:>5}/{:>+8.3f}", s.attempts, s.mean_log_gain);
    }
    std::cout << fmt::format("{:<50} {:>6.2f} {}\n", e.from_direction + " -> " + e.to_direction,
                             e.prior, lags);
  }
  show_runs(*store, options.backend);
  std::cout << "\n" << kLegend;
  return 0;
}

// What `graph -o FILE` writes, by FILE's extension: DOT text, or an image rendered by graphviz.
constexpr const char* kDotExtensions[] = {".dot", ".gv"};
constexpr const char* kImageExtensions[] = {".svg", ".png", ".pdf"};

std::string lowercase_extension(const std::string& file) {
  std::string extension = fs::path(file).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

bool is_one_of(const std::string& extension, std::span<const char* const> extensions) {
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const char* e) { return extension == e; });
}

// Refuses, at parse time, an output that would hold something other than its extension says
// (DOT text in g.png).
CLI::Validator graph_output_extension() {
  return CLI::Validator(
      [](std::string& file) -> std::string {
        const std::string extension = lowercase_extension(file);
        if (is_one_of(extension, kDotExtensions) || is_one_of(extension, kImageExtensions)) {
          return "";
        }
        return "expected a file ending in .dot or .gv (DOT text) or .svg, .png or .pdf "
               "(rendered by graphviz's dot), got '" +
               file + "'";
      },
      "FILE.{dot,gv,svg,png,pdf}");
}

// Renders `dot` into `image` with `dot -T<format>`, the format being the image's extension. The
// DOT text goes through a temporary file beside the image, removed afterwards (a g.dot of the
// user's next to g.svg is left alone); only when graphviz is missing is it kept, as IMAGE.dot.
void render_image(const std::string& dot, const fs::path& image, const std::string& format) {
  const fs::path folder = image.has_parent_path() ? image.parent_path() : fs::path(".");
  std::error_code error;
  if (!fs::is_directory(folder, error)) throw Error(cannot_write(image));
  fs::path dot_file = image;
  dot_file += ".dot.tmp" + std::to_string(::getpid());
  {
    std::ofstream out(dot_file);
    out << dot;
    if (!out) throw Error(cannot_write(image));
  }
  process::SpawnOptions spawn;
  spawn.argv = {"dot", "-T" + format, "-o", image.string(), dot_file.string()};
  spawn.pipe_stdin = false;
  std::unique_ptr<process::Subprocess> child;
  try {
    child = std::make_unique<process::Subprocess>(spawn);
  } catch (const std::exception& e) {
    fs::path kept = image;
    kept.replace_extension(".dot");
    fs::rename(dot_file, kept, error);
    throw Error("cannot render " + image.string() +
                ": graphviz's dot is not installed (apt-get install graphviz; " + e.what() +
                "); the DOT text is in " + kept.string());
  }
  // Graphviz lays out a few dozen nodes in well under a second; 60 s only guards a hang.
  std::optional<process::ExitStatus> status = child->wait(60.0);
  fs::remove(dot_file, error);
  if (!status || !status->exited || status->exit_code != 0) {
    throw Error("dot -T" + format + " failed to write " + image.string() + ": " +
                (status ? status->describe() : "timed out") + ": " + child->stderr_tail());
  }
}

int graph(const MemoryCommandOptions& options) {
  auto store = open_existing_store(options);
  std::string title = "kforge HTG" + (options.backend.empty() ? "" : " (" + options.backend + ")");
  std::string dot = memory::render_dot(store->directions(options.backend), store->edges(), title);
  if (options.output.empty()) {
    std::cout << dot;
    return 0;
  }
  const std::string extension = lowercase_extension(options.output);
  if (is_one_of(extension, kImageExtensions)) {
    render_image(dot, options.output, extension.substr(1));
  } else {
    std::ofstream out(options.output);
    out << dot;
    if (!out) throw Error(cannot_write(options.output));
  }
  std::cerr << "kforge: wrote " << options.output << "\n";
  return 0;
}

int export_memory(const MemoryCommandOptions& options) {
  auto store = open_existing_store(options);
  nlohmann::json document = store->export_json();
  // Written to a temporary file and renamed over FILE: a failed export leaves FILE as it was.
  const bool replaced = fs::is_regular_file(options.file);  // not a terminal or a pipe
  write_file_atomically(options.file, document.dump(2) + "\n");
  std::cerr << fmt::format(
      "kforge: exported {} directions, {} strategies, {} edges, {} evidence "
      "rows to {}{}\n",
      document["directions"].size(), document["strategies"].size(), document["edges"].size(),
      document["evidence"].size(), options.file, replaced ? " (replacing the file that was there)" : "");
  return 0;
}

int import_memory(const MemoryCommandOptions& options) {
  std::ifstream in(options.file);
  if (!in) throw Error("cannot read " + options.file);
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(options.file + ": invalid JSON: " + e.what());
  }
  auto store = open_store(options);
  memory::SqliteStore::ImportSummary summary = store->import_json(document, options.file);
  std::cout << fmt::format(
      "imported into {}: {} directions, {} strategies, {} edges, {} evidence rows added; {} "
      "evidence rows already present; {} recorded runs added, {} already present\n",
      store->path().string(), summary.directions_added, summary.strategies_added,
      summary.edges_added, summary.evidence_added, summary.evidence_skipped, summary.runs_added,
      summary.runs_skipped);
  return 0;
}

int reset(const MemoryCommandOptions& options) {
  auto store = open_existing_store(options);
  if (!options.yes) {
    std::cerr << fmt::format(
        "kforge: this deletes {} evidence rows and {} recorded runs from {}; "
        "rerun with --yes\n",
        store->evidence_count(), store->runs().size(), store->path().string());
    return 1;
  }
  store->reset(memory::load_knowledge(seed_path()));
  std::cout << "reset " << store->path().string() << " to the seed knowledge\n";
  return 0;
}

}  // namespace

void add_memory_command(CLI::App& app, MemoryCommandOptions& options) {
  CLI::App* memory = app.add_subcommand("memory", "Inspect, draw, move or reset the HTG memory");
  memory->require_subcommand(1);
  memory->fallthrough();  // --memory also after the subcommand: `kforge memory show --memory F`
  memory
      ->add_option("--memory", options.memory_path,
                   "Memory file (default $XDG_DATA_HOME/kforge/memory.sqlite)")
      ->envname("KFORGE_MEMORY");
  CLI::App* show = memory->add_subcommand("show", "Directions, strategies and edges as tables");
  // The backends a direction can list (knowledge/seed.toml); any other name matches nothing.
  const std::vector<std::string> names = backends::known_backend_names();
  const std::string only = "Only this backend (" + fmt::format("{}", fmt::join(names, ", ")) + ")";
  show->add_option("--backend", options.backend, only)
      ->check(CLI::IsMember(names));
  show->add_flag("--json", options.json, "Print the whole memory as JSON (the export format)");
  CLI::App* graph = memory->add_subcommand(
      "graph",
      "The HTG as Graphviz DOT (stdout or .dot/.gv), or an image rendered by graphviz "
      "when --output ends in .svg, .png or .pdf");
  graph->add_option("--backend", options.backend, only)
      ->check(CLI::IsMember(names));
  graph
      ->add_option("-o,--output", options.output,
                   "File to write (.dot or .gv; .svg, .png or .pdf via dot)")
      ->check(graph_output_extension());
  CLI::App* exporter = memory->add_subcommand("export", "Write the memory to a JSON file");
  exporter->add_option("file", options.file, "JSON file to write")->required();
  CLI::App* importer = memory->add_subcommand(
      "import",
      "Merge a JSON export into the memory (new nodes and evidence added, duplicates "
      "skipped, statistics recomputed)");
  importer->add_option("file", options.file, "JSON file to read")
      ->required()
      ->check(CLI::ExistingFile);
  CLI::App* reset = memory->add_subcommand("reset", "Delete all evidence and restore the seed");
  reset->add_flag("--yes", options.yes, "Do it without asking");
}

int run_memory(const CLI::App& memory, const MemoryCommandOptions& options) {
  if (memory.got_subcommand("show")) return show(options);
  if (memory.got_subcommand("graph")) return graph(options);
  if (memory.got_subcommand("export")) return export_memory(options);
  if (memory.got_subcommand("import")) return import_memory(options);
  if (memory.got_subcommand("reset")) return reset(options);
  throw Error("memory: expected show, graph, export, import or reset");
}

}  // namespace kforge::cli

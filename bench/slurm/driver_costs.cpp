// What the `--executor slurm` suite driver pays per job, as a function of scale (issue 23's
// paper-and-simulation target; bench/slurm/cost_model.py reads the JSON this writes):
//   snapshot  executor::snapshot_memory (VACUUM INTO) of a suite memory holding N evidence rows:
//             seconds and bytes; every job's submission pays it
//   merge     executor::merge_memory of one finished job's file (the snapshot it started from
//             plus its own new rows) into that suite memory: seconds; serial in the driver.
//             Since snapshots carry a mark, only the job's rows are exported; merge_whole_s is
//             the merge as it was before (the job's whole file exported, its duplicates skipped
//             by import) on a copy of the same suite memory, and rebuild_s the part of either
//             that still grows with the suite memory: import's recomputation of the statistics
//             from all evidence (schema::rebuild_stats, timed alone and rolled back)
//   squeue    executor::parse_squeue of M lines: seconds; every poll pays it once
// The evidence rows are copies of a real memory's rows (`kforge memory export` of a run's memory,
// --evidence), each copy with its own created_at and task hash so that none is a duplicate.
//
//   kforge_bench_driver_costs --evidence EXPORT.json [--seed knowledge/seed.toml]
//       [--sizes 0,1000,10000,50000] [--job-rows 40] [--repeats 3] [--out FILE.json]
//       [--dedupe-index]
// --dedupe-index is a what-if, not kforge's schema: it adds an index on the key import_json
// looks every row up by (task_hash, created_at) to the suite memory (the snapshots inherit it),
// to show what the merge would cost if that lookup did not scan a direction's rows.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <sqlite3.h>
#include <unistd.h>

#include "executor/job_memory.h"
#include "executor/slurm_client.h"
#include "memory/sqlite_schema.h"
#include "memory/sqlite_statement.h"
#include "memory/sqlite_store.h"

namespace {
namespace fs = std::filesystem;
using kforge::memory::SqliteStore;

struct Options {
  fs::path evidence_file;
  fs::path seed = "knowledge/seed.toml";
  std::vector<int> sizes = {0, 1000, 10000, 50000};
  std::vector<int> squeue_lines = {1, 10, 100, 1000, 10000};
  int job_rows = 40;  // new evidence rows a job brings (see --help)
  int repeats = 3;
  bool dedupe_index = false;
  fs::path out = "driver_costs.json";
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<int> parse_int_list(const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    values.push_back(std::stoi(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return values;
}

/// A kforge-memory document with `count` evidence rows cycled from `template_rows`; row i gets
/// created_at "<tag>-<i>" and task hash "<tag>-task-<i / rows_per_task>", so no two rows (and no
/// row of another tag) are duplicates under import_json's key.
nlohmann::json evidence_document(const nlohmann::json& export_doc, int count, int rows_per_task,
                                 const std::string& tag) {
  nlohmann::json doc = export_doc;
  const nlohmann::json& template_rows = export_doc.at("evidence");
  nlohmann::json rows = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    nlohmann::json row = template_rows[static_cast<std::size_t>(i) % template_rows.size()];
    row["created_at"] = fmt::format("2026-12-05T00:00:00.000Z-{}-{:07d}", tag, i);
    row["provenance"]["task_hash"] = fmt::format("{}-task-{}", tag, i / rows_per_task);
    rows.push_back(std::move(row));
  }
  doc["evidence"] = std::move(rows);
  doc["runs"] = nlohmann::json::array();
  return doc;
}

void add_dedupe_index(const fs::path& memory) {
  sqlite3* db = nullptr;
  char* message = nullptr;
  if (sqlite3_open(memory.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, "CREATE INDEX evidence_dedupe ON evidence(task_hash, created_at)", nullptr,
                   nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    sqlite3_close(db);
    throw std::runtime_error(memory.string() + ": cannot add the dedupe index: " + why);
  }
  sqlite3_close(db);
}

/// The merge before snapshot marks: the job's whole file exported, imported into `suite`.
double merge_whole(const fs::path& job, const fs::path& suite, const fs::path& seed) {
  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json rows = SqliteStore::open(job, "")->export_json();
  SqliteStore::open(suite, seed)->import_json(rows, job.string());
  return seconds_since(start);
}

/// schema::rebuild_stats on `suite` alone, in a transaction rolled back (nothing changes).
double rebuild_stats_s(const fs::path& suite) {
  kforge::memory::sqlite::Database db(suite.string(), 5000);
  const auto start = std::chrono::steady_clock::now();
  {
    kforge::memory::sqlite::Transaction transaction(db);
    kforge::memory::schema::rebuild_stats(db);
  }
  return seconds_since(start);
}

/// One suite-memory size: builds the memory, then `repeats` times snapshots it (a job starts),
/// adds the job's rows to the snapshot (the job runs), merges it back (the job ended), the old
/// way into a copy of the suite memory and the new way into the suite memory itself.
nlohmann::json measure_size(const Options& options, const nlohmann::json& export_doc, int size,
                            const fs::path& work) {
  const fs::path suite = work / fmt::format("suite-{}.sqlite", size);
  SqliteStore::open(suite, options.seed)
      ->import_json(evidence_document(export_doc, size, options.job_rows, "suite"), "suite");
  if (options.dedupe_index) add_dedupe_index(suite);
  std::vector<double> snapshot_s, merge_s, merge_whole_s, rebuild_s;
  std::uintmax_t snapshot_bytes = 0;
  for (int r = 0; r < options.repeats; ++r) {
    const fs::path job = work / fmt::format("job-{}-{}.sqlite", size, r);
    auto start = std::chrono::steady_clock::now();
    kforge::executor::snapshot_memory(suite, options.seed, job);
    snapshot_s.push_back(seconds_since(start));
    snapshot_bytes = fs::file_size(job);
    SqliteStore::open(job, "")->import_json(
        evidence_document(export_doc, options.job_rows, options.job_rows,
                          fmt::format("job{}-{}", size, r)),
        "job");
    const fs::path suite_copy = work / "suite-copy.sqlite";
    fs::copy_file(suite, suite_copy, fs::copy_options::overwrite_existing);
    merge_whole_s.push_back(merge_whole(job, suite_copy, options.seed));
    fs::remove(suite_copy);
    rebuild_s.push_back(rebuild_stats_s(suite));
    start = std::chrono::steady_clock::now();
    const auto merged = kforge::executor::merge_memory(job, suite, options.seed);
    merge_s.push_back(seconds_since(start));
    if (merged.evidence_added != options.job_rows || !merged.past_mark_only ||
        merged.evidence_skipped != 0) {
      throw std::runtime_error(fmt::format("merge added {} rows, skipped {}, expected {} and 0",
                                           merged.evidence_added, merged.evidence_skipped,
                                           options.job_rows));
    }
    fs::remove(job);
  }
  std::cerr << fmt::format(
      "suite rows {:6d}: snapshot {:.4f} s ({} bytes), merge {:.4f} s (whole file: {:.4f} s; "
      "statistics rebuild alone {:.4f} s)\n",
      size, median(snapshot_s), snapshot_bytes, median(merge_s), median(merge_whole_s),
      median(rebuild_s));
  return {{"suite_evidence_rows", size},
          {"snapshot_s_median", median(snapshot_s)},
          {"snapshot_s", snapshot_s},
          {"snapshot_bytes", snapshot_bytes},
          {"merge_s_median", median(merge_s)},
          {"merge_s", merge_s},
          {"merge_whole_s_median", median(merge_whole_s)},
          {"merge_whole_s", merge_whole_s},
          {"rebuild_stats_s_median", median(rebuild_s)},
          {"rebuild_stats_s", rebuild_s}};
}

/// parse_squeue on `lines` synthetic lines in the format the executor asks squeue for.
nlohmann::json measure_squeue(int lines, int repeats) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += fmt::format("{}|RUNNING|None|gpu{:03d}\n", 100000 + i, i % 128);
  std::vector<double> parse_s;
  for (int r = 0; r < std::max(repeats, 5); ++r) {
    const auto start = std::chrono::steady_clock::now();
    const auto jobs = kforge::executor::parse_squeue(text);
    parse_s.push_back(seconds_since(start));
    if (static_cast<int>(jobs.size()) != lines) throw std::runtime_error("parse_squeue lost lines");
  }
  return {{"lines", lines}, {"parse_s_median", median(parse_s)}, {"bytes", text.size()}};
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + ": expected a value");
      return argv[++i];
    };
    if (arg == "--evidence") options.evidence_file = value();
    else if (arg == "--seed") options.seed = value();
    else if (arg == "--sizes") options.sizes = parse_int_list(value());
    else if (arg == "--squeue-lines") options.squeue_lines = parse_int_list(value());
    else if (arg == "--job-rows") options.job_rows = std::stoi(value());
    else if (arg == "--repeats") options.repeats = std::stoi(value());
    else if (arg == "--out") options.out = value();
    else if (arg == "--dedupe-index") options.dedupe_index = true;
    else throw std::runtime_error("unknown option " + arg + " (see the comment atop driver_costs.cpp)");
  }
  if (options.evidence_file.empty()) throw std::runtime_error("--evidence EXPORT.json is required");
  if (options.job_rows < 1 || options.repeats < 1) throw std::runtime_error("--job-rows, --repeats: >= 1");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    std::ifstream in(options.evidence_file);
    const nlohmann::json export_doc = nlohmann::json::parse(in);
    if (export_doc.at("evidence").empty()) throw std::runtime_error("the export has no evidence");
    const fs::path work = fs::temp_directory_path() /
                          fmt::format("kforge-driver-costs-{}", static_cast<long>(::getpid()));
    fs::create_directories(work);
    nlohmann::json memory = nlohmann::json::array();
    for (int size : options.sizes) memory.push_back(measure_size(options, export_doc, size, work));
    nlohmann::json squeue = nlohmann::json::array();
    for (int lines : options.squeue_lines) squeue.push_back(measure_squeue(lines, options.repeats));
    fs::remove_all(work);
    const nlohmann::json result = {
        {"what", "suite driver costs per job: snapshot_memory, merge_memory, parse_squeue"},
        {"evidence_template", options.evidence_file.string()},
        {"template_rows", export_doc.at("evidence").size()},
        {"job_rows", options.job_rows},
        {"repeats", options.repeats},
        {"dedupe_index", options.dedupe_index},
        {"memory", memory},
        {"squeue_parse", squeue}};
    std::ofstream(options.out) << result.dump(2) << "\n";
    std::cerr << "wrote " << options.out.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kforge_bench_driver_costs: error: " << e.what() << "\n";
    return 1;
  }
}

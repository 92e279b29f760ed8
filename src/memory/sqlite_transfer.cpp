// Export and import of a whole memory as JSON (SqliteStore::export_json / import_json). Format
// "kforge-memory" version 1:
//   { "format": "kforge-memory", "version": 1, "schema_version": 2,
//     "directions": [{id, title, goal, triggers[], risks[], backends[], prior, stats}],
//     "strategies": [{id, direction, title, edit_pattern, validation[], triggers[],
//                     edits[{param, op, value}], backends[], stats}],
//     "edges": [{from, to, rationale, risks, prior, lags: [stats of lag 1, 2, 3]}],
//     "evidence": [{created_at, direction, strategy, prefix[], verdict, log_gain,
//                   speedup_vs_baseline, candidate_id, excerpt, failure_reason, diagnosis,
//                   provenance {backend, device, compute_capability, toolchain, family,
//                   task_hash}}],
//     "runs": [recorded runs, recorded_run.h to_json; since schema 3, optional on import] }
// Statistics are exported for people and tools to read; import recomputes them from evidence.
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "memory/recorded_run.h"
#include "memory/sqlite_schema.h"
#include "memory/sqlite_statement.h"
#include "memory/sqlite_store.h"

namespace kforge::memory {
namespace {

constexpr const char* kFormat = "kforge-memory";
constexpr int kFormatVersion = 1;

nlohmann::json stats_json(const Stats& s) {
  return {{"attempts", s.attempts},
          {"compile_successes", s.compile_successes},
          {"correct_successes", s.correct_successes},
          {"successes", s.successes},
          {"ok_attempts", s.ok_attempts},
          {"mean_log_gain", s.mean_log_gain},
          {"ema_log_gain", s.ema_log_gain},
          {"last_used", s.last_used}};
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

std::optional<double> optional_number(const nlohmann::json& item, const char* key) {
  const nlohmann::json& value = item.at(key);
  if (value.is_null()) return std::nullopt;
  return value.get<double>();
}

Direction direction_from(const nlohmann::json& j) {
  Direction d;
  d.id = j.at("id").get<std::string>();
  d.title = j.at("title").get<std::string>();
  d.goal = j.at("goal").get<std::string>();
  d.triggers = j.at("triggers").get<std::vector<std::string>>();
  d.risks = j.at("risks").get<std::vector<std::string>>();
  d.backends = j.at("backends").get<std::vector<std::string>>();
  d.prior = j.at("prior").get<double>();
  return d;
}

Strategy strategy_from(const nlohmann::json& j) {
  Strategy s;
  s.id = j.at("id").get<std::string>();
  s.direction_id = j.at("direction").get<std::string>();
  s.title = j.at("title").get<std::string>();
  s.edit_pattern = j.at("edit_pattern").get<std::string>();
  s.validation = j.at("validation").get<std::vector<std::string>>();
  s.triggers = j.at("triggers").get<std::vector<std::string>>();
  for (const nlohmann::json& edit : j.at("edits")) {
    s.edits.push_back({edit.at("param").get<std::string>(), edit.at("op").get<std::string>(),
                       edit.at("value").get<std::string>()});
  }
  s.backends = j.at("backends").get<std::vector<std::string>>();
  return s;
}

Edge edge_from(const nlohmann::json& j) {
  Edge e;
  e.from_direction = j.at("from").get<std::string>();
  e.to_direction = j.at("to").get<std::string>();
  e.rationale = j.at("rationale").get<std::string>();
  e.risks = j.at("risks").get<std::string>();
  e.prior = j.at("prior").get<double>();
  return e;
}

Evidence evidence_from(const nlohmann::json& j) {
  Evidence e;
  e.created_at = j.at("created_at").get<std::string>();
  e.direction_id = j.at("direction").get<std::string>();
  e.strategy_id = j.at("strategy").get<std::string>();
  e.prefix = j.at("prefix").get<std::vector<std::string>>();
  e.verdict = j.at("verdict").get<std::string>();
  e.log_gain = optional_number(j, "log_gain");
  e.speedup_vs_baseline = optional_number(j, "speedup_vs_baseline");
  e.candidate_id = j.at("candidate_id").get<std::string>();
  e.excerpt = j.at("excerpt").get<std::string>();
  e.failure_reason = j.at("failure_reason").get<std::string>();
  e.diagnosis = j.at("diagnosis").get<std::string>();
  e.provenance = provenance_from(j.at("provenance"));
  if (e.log_gain && !std::isfinite(*e.log_gain)) throw Error("log_gain must be finite");
  return e;
}

// Runs `parse` on every element of document[key], naming the element in errors.
template <typename Parse>
auto parse_list(const nlohmann::json& document, const char* key, const std::string& source,
                Parse parse) {
  std::vector<decltype(parse(document))> result;
  const nlohmann::json& list = document.at(key);
  if (!list.is_array()) throw Error(source + ": field '" + key + "': expected an array");
  for (std::size_t i = 0; i < list.size(); ++i) {
    try {
      result.push_back(parse(list[i]));
    } catch (const std::exception& e) {
      throw Error(source + ": " + key + "[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return result;
}

bool exists(sqlite::Database& db, const std::string& sql, const std::vector<std::string>& keys) {
  sqlite::Statement query(db, sql);
  for (std::size_t i = 0; i < keys.size(); ++i) query.bind(static_cast<int>(i) + 1, keys[i]);
  return query.step();
}

}  // namespace

nlohmann::json SqliteStore::export_json() { return export_json(Mark{}); }

nlohmann::json SqliteStore::export_json(const Mark& after) {
  nlohmann::json document = {
      {"format", kFormat}, {"version", kFormatVersion}, {"schema_version", kSchemaVersion}};
  nlohmann::json& directions_json = document["directions"] = nlohmann::json::array();
  nlohmann::json& strategies_json = document["strategies"] = nlohmann::json::array();
  for (const Direction& d : directions("")) {
    directions_json.push_back({{"id", d.id},
                               {"title", d.title},
                               {"goal", d.goal},
                               {"triggers", d.triggers},
                               {"risks", d.risks},
                               {"backends", d.backends},
                               {"prior", d.prior},
                               {"stats", stats_json(d.stats)}});
    for (const Strategy& s : strategies(d.id)) {
      nlohmann::json edits = nlohmann::json::array();
      for (const ParamEdit& edit : s.edits) {
        edits.push_back({{"param", edit.param}, {"op", edit.op}, {"value", edit.value}});
      }
      strategies_json.push_back({{"id", s.id},
                                 {"direction", s.direction_id},
                                 {"title", s.title},
                                 {"edit_pattern", s.edit_pattern},
                                 {"validation", s.validation},
                                 {"triggers", s.triggers},
                                 {"edits", edits},
                                 {"backends", s.backends},
                                 {"stats", stats_json(s.stats)}});
    }
  }
  nlohmann::json& edges_json = document["edges"] = nlohmann::json::array();
  for (const Edge& e : edges()) {
    nlohmann::json lags = nlohmann::json::array();
    for (const Stats& s : e.by_lag) lags.push_back(stats_json(s));
    edges_json.push_back({{"from", e.from_direction},
                          {"to", e.to_direction},
                          {"rationale", e.rationale},
                          {"risks", e.risks},
                          {"prior", e.prior},
                          {"lags", lags}});
  }
  nlohmann::json& evidence_json = document["evidence"] = nlohmann::json::array();
  for (const Evidence& e : evidence_after("", after.evidence_id)) {
    const Provenance& p = e.provenance;
    evidence_json.push_back({{"created_at", e.created_at},
                             {"direction", e.direction_id},
                             {"strategy", e.strategy_id},
                             {"prefix", e.prefix},
                             {"verdict", e.verdict},
                             {"log_gain", optional_json(e.log_gain)},
                             {"speedup_vs_baseline", optional_json(e.speedup_vs_baseline)},
                             {"candidate_id", e.candidate_id},
                             {"excerpt", e.excerpt},
                             {"failure_reason", e.failure_reason},
                             {"diagnosis", e.diagnosis},
                             {"provenance", provenance_json(p)}});
  }
  nlohmann::json& runs_json = document["runs"] = nlohmann::json::array();
  for (const RecordedRun& run : runs_after("", after.run_id)) runs_json.push_back(to_json(run));
  return document;
}

std::string describe_seed_additions(const SqliteStore& store) {
  const SqliteStore::ImportSummary& added = store.seed_additions();
  std::vector<std::string> parts;
  auto count = [&](int n, const char* one, const char* many) {
    if (n > 0) parts.push_back(std::to_string(n) + " " + (n == 1 ? one : many));
  };
  count(added.directions_added, "direction", "directions");
  count(added.strategies_added, "strategy", "strategies");
  count(added.edges_added, "edge", "edges");
  if (parts.empty()) return "";
  std::string list = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) {
    list += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return "memory " + store.path().string() + ": added " + list +
         " of this kforge's seed it did not have (its evidence is unchanged)";
}

SqliteStore::ImportSummary SqliteStore::add_missing_seed(const Knowledge& seed) {
  ImportSummary summary;
  // Read first: a memory that lacks nothing is not written (a read-only file stays readable).
  auto lacks_something = [&] {
    for (const Direction& d : seed.directions) {
      if (!exists(*db_, "SELECT 1 FROM directions WHERE id = ?1", {d.id})) return true;
    }
    for (const Strategy& s : seed.strategies) {
      if (!exists(*db_, "SELECT 1 FROM strategies WHERE id = ?1", {s.id})) return true;
    }
    for (const Edge& e : seed.edges) {
      if (!exists(*db_, "SELECT 1 FROM edges WHERE from_direction = ?1 AND to_direction = ?2",
                  {e.from_direction, e.to_direction})) {
        return true;
      }
    }
    return false;
  };
  if (!lacks_something()) return summary;
  sqlite::Transaction transaction(*db_);  // checks again inside: another process may have added
  for (const Direction& d : seed.directions) {
    if (exists(*db_, "SELECT 1 FROM directions WHERE id = ?1", {d.id})) continue;
    insert_direction(d);
    ++summary.directions_added;
  }
  for (const Strategy& s : seed.strategies) {
    if (exists(*db_, "SELECT 1 FROM strategies WHERE id = ?1", {s.id})) continue;
    with_context("seed strategy '" + s.id + "'", [&] { insert_strategy(s); });
    ++summary.strategies_added;
  }
  for (const Edge& e : seed.edges) {
    if (exists(*db_, "SELECT 1 FROM edges WHERE from_direction = ?1 AND to_direction = ?2",
               {e.from_direction, e.to_direction})) {
      continue;
    }
    with_context("seed edge '" + e.from_direction + "' -> '" + e.to_direction + "'",
                 [&] { insert_edge(e); });
    ++summary.edges_added;
  }
  transaction.commit();
  return summary;
}

SqliteStore::ImportSummary SqliteStore::import_json(const nlohmann::json& document,
                                                    const std::string& source) {
  if (!document.is_object() || document.value("format", "") != kFormat) {
    throw Error(source + ": not a kforge memory export (expected \"format\": \"" + kFormat + "\")");
  }
  if (document.value("version", 0) != kFormatVersion) {
    throw Error(source + ": field 'version': expected " + std::to_string(kFormatVersion) +
                " (export written by another kforge?)");
  }
  auto parse_all = [&](const char* key, auto parse) {
    try {
      return parse_list(document, key, source, parse);
    } catch (const nlohmann::json::exception& e) {
      throw Error(source + ": field '" + key + "': " + e.what());
    }
  };
  auto directions_in = parse_all("directions", direction_from);
  auto strategies_in = parse_all("strategies", strategy_from);
  auto edges_in = parse_all("edges", edge_from);
  auto evidence_in = parse_all("evidence", evidence_from);
  std::vector<RecordedRun> runs_in;
  if (document.contains("runs")) {
    runs_in =
        parse_all("runs", [](const nlohmann::json& j) { return recorded_run_from(j, "run"); });
  }

  ImportSummary summary;
  sqlite::Transaction transaction(*db_);
  for (const Direction& d : directions_in) {
    if (exists(*db_, "SELECT 1 FROM directions WHERE id = ?1", {d.id})) continue;
    insert_direction(d);
    ++summary.directions_added;
  }
  for (const Strategy& s : strategies_in) {
    if (exists(*db_, "SELECT 1 FROM strategies WHERE id = ?1", {s.id})) continue;
    with_context(source + ": strategy '" + s.id + "'", [&] {
      if (!exists(*db_, "SELECT 1 FROM directions WHERE id = ?1", {s.direction_id})) {
        throw Error("unknown direction '" + s.direction_id + "'");
      }
      insert_strategy(s);
    });
    ++summary.strategies_added;
  }
  for (const Edge& e : edges_in) {
    if (exists(*db_, "SELECT 1 FROM edges WHERE from_direction = ?1 AND to_direction = ?2",
               {e.from_direction, e.to_direction})) {
      continue;
    }
    with_context(source + ": edge '" + e.from_direction + "' -> '" + e.to_direction + "'",
                 [&] { insert_edge(e); });
    ++summary.edges_added;
  }
  for (std::size_t i = 0; i < evidence_in.size(); ++i) {
    const Evidence& e = evidence_in[i];
    if (exists(*db_,
               "SELECT 1 FROM evidence WHERE created_at = ?1 AND direction_id = ?2 AND "
               "coalesce(strategy_id, '') = ?3 AND candidate_id = ?4 AND verdict = ?5 AND "
               "task_hash = ?6",
               {e.created_at, e.direction_id, e.strategy_id, e.candidate_id, e.verdict,
                e.provenance.task_hash})) {
      ++summary.evidence_skipped;
      continue;
    }
    with_context(source + ": evidence[" + std::to_string(i) + "] (direction '" + e.direction_id +
                     "', strategy '" + e.strategy_id + "')",
                 [&] {
                   // Named here: SQLite would print its INSERT and "FOREIGN KEY constraint failed".
                   if (!exists(*db_, "SELECT 1 FROM directions WHERE id = ?1", {e.direction_id})) {
                     throw Error("unknown direction '" + e.direction_id + "'");
                   }
                   if (!e.strategy_id.empty() &&
                       !exists(*db_, "SELECT 1 FROM strategies WHERE id = ?1", {e.strategy_id})) {
                     throw Error("unknown strategy '" + e.strategy_id + "'");
                   }
                   insert_evidence(e, e.created_at);
                 });
    ++summary.evidence_added;
  }
  for (std::size_t i = 0; i < runs_in.size(); ++i) {
    const RecordedRun& run = runs_in[i];
    if (exists(*db_,
               "SELECT 1 FROM runs WHERE created_at = ?1 AND kind = ?2 AND task = ?3 AND "
               "task_hash = ?4",
               {run.created_at, run.kind, run.task, run.provenance.task_hash})) {
      ++summary.runs_skipped;
      continue;
    }
    with_context(source + ": runs[" + std::to_string(i) + "]", [&] { insert_run(run); });
    ++summary.runs_added;
  }
  schema::rebuild_stats(*db_);
  transaction.commit();
  return summary;
}

}  // namespace kforge::memory

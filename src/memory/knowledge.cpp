#include "memory/knowledge.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <utility>

#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
// Debian's libtomlplusplus-dev ships the same single header under the name toml.h.
#include <toml++/toml.h>
#endif

#include "backends/backend.h"
#include "common/error.h"

namespace kforge::memory {
namespace {

// A direction may name any backend kforge has (in this build or not: a memory travels between
// machines), and torch (PyTorch candidates).
std::vector<std::string> known_backends() {
  std::vector<std::string> names = backends::known_backend_names();
  names.push_back("torch");
  return names;
}
constexpr std::array<std::string_view, 6> kEditOps = {"set", "increase", "decrease",
                                                      "max", "min",      "variant"};

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

/// Names the entry being read ("direction 'fusion'") for error messages.
class Context {
 public:
  Context(std::string source, std::string entry)
      : source_(std::move(source)), entry_(std::move(entry)) {}

  Context nested(const std::string& entry) const {
    return Context(source_, entry_.empty() ? entry : entry_ + ": " + entry);
  }

  [[noreturn]] void fail(const toml::node* where, const std::string& field,
                         const std::string& message) const {
    std::string location = source_;
    if (where != nullptr && where->source().begin.line > 0) {
      location += ":" + std::to_string(where->source().begin.line);
    }
    const std::string entry = entry_.empty() ? "top level" : entry_;
    throw Error(location + ": " + entry + ": field '" + field + "': " + message);
  }

 private:
  std::string source_;
  std::string entry_;
};

void check_keys(const toml::table& table, std::initializer_list<std::string_view> allowed,
                const Context& context) {
  for (const auto& [key, value] : table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
    std::string expected;
    for (std::string_view name : allowed) {
      expected += (expected.empty() ? "" : ", ") + std::string(name);
    }
    context.fail(&value, std::string(key.str()),
                 "unknown field (expected one of: " + expected + ")");
  }
}

const toml::node& require(const toml::table& table, const std::string& key,
                          const std::string& expected, const Context& context) {
  const toml::node* node = table.get(key);
  if (node == nullptr) context.fail(&table, key, "missing (expected " + expected + ")");
  return *node;
}

std::string require_string(const toml::table& table, const std::string& key,
                           const Context& context) {
  const toml::node& node = require(table, key, "a string", context);
  if (!node.is_string()) context.fail(&node, key, "expected a string, got " + type_name(node));
  return node.as_string()->get();
}

std::string require_id(const toml::table& table, const std::string& key, const Context& context) {
  std::string id = require_string(table, key, context);
  bool valid = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!valid) {
    context.fail(table.get(key), key, "expected a non-empty id of [a-z0-9_], got '" + id + "'");
  }
  return id;
}

std::vector<std::string> require_strings(const toml::table& table, const std::string& key,
                                         const Context& context) {
  const toml::node& node = require(table, key, "an array of strings", context);
  if (!node.is_array()) {
    context.fail(&node, key, "expected an array of strings, got " + type_name(node));
  }
  std::vector<std::string> values;
  for (const toml::node& element : *node.as_array()) {
    if (!element.is_string()) {
      context.fail(&element, key, "expected an array of strings, found " + type_name(element));
    }
    values.push_back(element.as_string()->get());
  }
  return values;
}

double require_prior(const toml::table& table, const Context& context) {
  const toml::node& node = require(table, "prior", "a number in [-1, 1]", context);
  double value = 0.0;
  if (node.is_integer()) {
    value = static_cast<double>(node.as_integer()->get());
  } else if (node.is_floating_point()) {
    value = node.as_floating_point()->get();
  } else {
    context.fail(&node, "prior", "expected a number in [-1, 1], got " + type_name(node));
  }
  if (!std::isfinite(value) || value < -1.0 || value > 1.0) {
    context.fail(&node, "prior", "expected a number in [-1, 1], got " + std::to_string(value));
  }
  return value;
}

const toml::array* optional_table_array(const toml::table& table, const std::string& key,
                                        const Context& context) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return nullptr;
  if (!node->is_array_of_tables()) {
    context.fail(node, key,
                 "expected an array of tables ([[" + key + "]]), got " + type_name(*node));
  }
  return node->as_array();
}

std::vector<std::string> require_backends(const toml::table& table, const Context& context) {
  std::vector<std::string> backends = require_strings(table, "backends", context);
  if (backends.empty()) {
    context.fail(table.get("backends"), "backends", "expected at least one backend");
  }
  const std::vector<std::string> known = known_backends();
  std::vector<std::string> quoted;
  for (const std::string& name : known) quoted.push_back("\"" + name + "\"");
  for (const std::string& backend : backends) {
    if (std::find(known.begin(), known.end(), backend) == known.end()) {
      context.fail(table.get("backends"), "backends",
                   "expected " + backends::name_list(quoted) + ", got \"" + backend + "\"");
    }
  }
  return backends;
}

ParamEdit parse_edit(const toml::node& node, const Context& context) {
  if (!node.is_table()) context.fail(&node, "edits", "expected inline tables {param, op, value}");
  const toml::table& table = *node.as_table();
  check_keys(table, {"param", "op", "value"}, context);
  ParamEdit edit;
  edit.op = require_string(table, "op", context);
  if (std::find(kEditOps.begin(), kEditOps.end(), edit.op) == kEditOps.end()) {
    context.fail(&node, "op",
                 "expected set, increase, decrease, max, min or variant, got '" + edit.op + "'");
  }
  const bool is_variant = edit.op == "variant";
  if (is_variant && table.contains("param")) {
    context.fail(&node, "param", "not allowed with op = \"variant\"");
  }
  if (!is_variant) {
    edit.param = require_string(table, "param", context);
    if (edit.param.empty()) context.fail(&node, "param", "expected a parameter name");
  }
  const bool needs_value = is_variant || edit.op == "set";
  if (!needs_value) {
    if (table.contains("value")) {
      context.fail(&node, "value", "not allowed with op = \"" + edit.op + "\"");
    }
    return edit;
  }
  const toml::node& value = require(table, "value", "a string or an integer", context);
  if (value.is_string()) {
    edit.value = value.as_string()->get();
  } else if (value.is_integer() && !is_variant) {
    edit.value = std::to_string(value.as_integer()->get());
  } else {
    context.fail(&value, "value",
                 std::string("expected ") +
                     (is_variant ? "a variant name" : "a string or an integer") + ", got " +
                     type_name(value));
  }
  if (edit.value.empty()) context.fail(&value, "value", "expected a non-empty value");
  return edit;
}

Strategy parse_strategy(const toml::table& table, const Direction& direction,
                        const Context& parent, bool top_level = false) {
  Context context = parent.nested("strategy");
  if (top_level) {
    check_keys(table,
               {"id", "direction", "title", "edit_pattern", "validation", "triggers", "edits",
                "backends"},
               context);
  } else {
    check_keys(table,
               {"id", "title", "edit_pattern", "validation", "triggers", "edits", "backends"},
               context);
  }
  Strategy strategy;
  strategy.id = require_id(table, "id", context);
  context = parent.nested("strategy '" + strategy.id + "'");
  strategy.direction_id = direction.id;
  strategy.title = require_string(table, "title", context);
  strategy.edit_pattern = require_string(table, "edit_pattern", context);
  strategy.validation = require_strings(table, "validation", context);
  strategy.triggers = require_strings(table, "triggers", context);
  const toml::node& edits = require(table, "edits", "an array of {param, op, value}", context);
  if (!edits.is_array()) {
    context.fail(&edits, "edits",
                 "expected an array of {param, op, value}, got " + type_name(edits));
  }
  for (const toml::node& edit : *edits.as_array()) {
    strategy.edits.push_back(parse_edit(edit, context));
  }
  strategy.backends = direction.backends;
  if (table.contains("backends")) {
    strategy.backends = require_backends(table, context);
    for (const std::string& backend : strategy.backends) {
      if (std::find(direction.backends.begin(), direction.backends.end(), backend) ==
          direction.backends.end()) {
        context.fail(table.get("backends"), "backends",
                     "expected a subset of the direction's backends, got \"" + backend + "\"");
      }
    }
  }
  return strategy;
}

Direction parse_direction(const toml::table& table, const Context& file, Knowledge& knowledge,
                          std::set<std::string>& strategy_ids) {
  Context context = file.nested("direction");
  check_keys(table, {"id", "title", "goal", "triggers", "risks", "backends", "prior", "strategies"},
             context);
  Direction direction;
  direction.id = require_id(table, "id", context);
  context = file.nested("direction '" + direction.id + "'");
  direction.title = require_string(table, "title", context);
  direction.goal = require_string(table, "goal", context);
  direction.triggers = require_strings(table, "triggers", context);
  direction.risks = require_strings(table, "risks", context);
  direction.backends = require_backends(table, context);
  direction.prior = require_prior(table, context);
  const toml::array* strategies = optional_table_array(table, "strategies", context);
  if (strategies == nullptr || strategies->empty()) {
    context.fail(&table, "strategies", "expected at least one [[directions.strategies]]");
  }
  for (const toml::node& node : *strategies) {
    Strategy strategy = parse_strategy(*node.as_table(), direction, context);
    if (!strategy_ids.insert(strategy.id).second) {
      context.fail(&node, "id", "duplicate strategy id '" + strategy.id + "'");
    }
    knowledge.strategies.push_back(std::move(strategy));
  }
  return direction;
}

Edge parse_edge(const toml::table& table, const std::set<std::string>& direction_ids,
                const Context& file) {
  Context context = file.nested("edge");
  check_keys(table, {"from", "to", "rationale", "risks", "prior"}, context);
  Edge edge;
  edge.from_direction = require_id(table, "from", context);
  edge.to_direction = require_id(table, "to", context);
  context = file.nested("edge '" + edge.from_direction + "' -> '" + edge.to_direction + "'");
  for (const char* key : {"from", "to"}) {
    std::string id = table.get(key)->as_string()->get();
    if (direction_ids.count(id) == 0) {
      context.fail(table.get(key), key,
                   "expected a direction id defined in this file, got '" + id + "'");
    }
  }
  edge.rationale = require_string(table, "rationale", context);
  edge.risks = require_string(table, "risks", context);
  edge.prior = require_prior(table, context);
  return edge;
}

// A top-level [[strategies]] entry names its direction, which must be defined in the file.
void parse_top_level_strategies(const toml::table& root, const Context& file,
                                Knowledge& knowledge, std::set<std::string>& strategy_ids) {
  const toml::array* strategies = optional_table_array(root, "strategies", file);
  for (std::size_t i = 0; strategies != nullptr && i < strategies->size(); ++i) {
    const toml::table& table = *(*strategies)[i].as_table();
    Context context = file.nested("strategy");
    const std::string id = require_id(table, "id", context);
    context = file.nested("strategy '" + id + "'");
    const std::string direction_id = require_id(table, "direction", context);
    auto direction = std::find_if(knowledge.directions.begin(), knowledge.directions.end(),
                                  [&](const Direction& d) { return d.id == direction_id; });
    if (direction == knowledge.directions.end()) {
      context.fail(table.get("direction"), "direction",
                   "expected a direction id defined in this file, got '" + direction_id + "'");
    }
    Strategy strategy = parse_strategy(table, *direction, file, /*top_level=*/true);
    if (!strategy_ids.insert(strategy.id).second) {
      context.fail(&table, "id", "duplicate strategy id '" + strategy.id + "'");
    }
    knowledge.strategies.push_back(std::move(strategy));
  }
}

Knowledge parse_table(const toml::table& root, const std::string& source_name) {
  Context file(source_name, "");
  check_keys(root, {"version", "directions", "strategies", "edges"}, file);
  const toml::node& version = require(root, "version", "the integer 1", file);
  if (!version.is_integer() || version.as_integer()->get() != kKnowledgeFormatVersion) {
    file.fail(&version, "version",
              "expected the integer " + std::to_string(kKnowledgeFormatVersion));
  }
  Knowledge knowledge;
  knowledge.version = kKnowledgeFormatVersion;
  const toml::array* directions = optional_table_array(root, "directions", file);
  if (directions == nullptr || directions->empty()) {
    file.fail(&root, "directions", "expected at least one [[directions]]");
  }
  std::set<std::string> direction_ids;
  std::set<std::string> strategy_ids;
  for (const toml::node& node : *directions) {
    Direction direction = parse_direction(*node.as_table(), file, knowledge, strategy_ids);
    if (!direction_ids.insert(direction.id).second) {
      file.nested("direction '" + direction.id + "'").fail(&node, "id", "duplicate direction id");
    }
    knowledge.directions.push_back(std::move(direction));
  }
  parse_top_level_strategies(root, file, knowledge, strategy_ids);
  const toml::array* edges = optional_table_array(root, "edges", file);
  std::set<std::pair<std::string, std::string>> edge_keys;
  for (std::size_t i = 0; edges != nullptr && i < edges->size(); ++i) {
    Edge edge = parse_edge(*(*edges)[i].as_table(), direction_ids, file);
    if (!edge_keys.emplace(edge.from_direction, edge.to_direction).second) {
      file.nested("edge '" + edge.from_direction + "' -> '" + edge.to_direction + "'")
          .fail(&(*edges)[i], "from", "duplicate edge");
    }
    knowledge.edges.push_back(std::move(edge));
  }
  return knowledge;
}

}  // namespace

Knowledge parse_knowledge(std::string_view text, const std::string& source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    throw Error(source_name + ":" + std::to_string(e.source().begin.line) + ":" +
                std::to_string(e.source().begin.column) +
                ": invalid TOML: " + std::string(e.description()));
  }
  return parse_table(root, source_name);
}

Knowledge load_knowledge(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read knowledge file " + path.string() + " (expected a readable TOML file)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("error while reading knowledge file " + path.string());
  return parse_knowledge(text.str(), path.string());
}

std::filesystem::path default_seed_knowledge_path() {
  if (const char* overridden = std::getenv("KFORGE_SEED_KNOWLEDGE");
      overridden != nullptr && *overridden != '\0') {
    return overridden;
  }
#ifdef KFORGE_SOURCE_DIR
  return std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";
#else
  return std::filesystem::path("knowledge") / "seed.toml";
#endif
}

}  // namespace kforge::memory

// torch_extents (torch_extents.h): the extent rules of a PyTorch task, checked.
#include "task/torch_extents.h"

#include <set>

#include "common/error.h"

namespace kforge {

using json = nlohmann::json;

namespace {

std::set<std::string> shape_symbols(const Task& task) {
  std::set<std::string> symbols;
  for (const TensorSpec& tensor : task.signature.tensors) {
    for (const std::string& dim : tensor.shape) symbols.insert(dim);
  }
  return symbols;
}

bool whole(const json& value) { return value.is_number_integer(); }

// floor(a / b) for b >= 1 (Python's //, which the solution's rule uses too).
int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); }

}  // namespace

void validate_extents(const Task& task, const json& extents, const std::string& where) {
  const std::string at = where + ".extents";
  if (!extents.is_object()) throw Error(at + ": expected a table of symbol = {const, terms}");
  const std::set<std::string> symbols = shape_symbols(task);
  for (const auto& [symbol, rule] : extents.items()) {
    const std::string here = at + "." + symbol;
    if (!symbols.count(symbol)) {
      throw Error(here + ": not a symbol of the signature's shapes");
    }
    const bool has_div = rule.is_object() && rule.contains("div");
    if (!rule.is_object() || !rule.contains("const") || !whole(rule.at("const")) ||
        !rule.contains("terms") || !rule.at("terms").is_array() ||
        rule.size() != (has_div ? 3u : 2u) ||
        (has_div && (!whole(rule.at("div")) || rule.at("div").get<int64_t>() < 1))) {
      throw Error(here + ": expected {const = <whole number>, terms = [[<whole number>, "
                         "\"<symbol>\"], ...], div = <whole number >= 1, optional>}");
    }
    const int64_t div = has_div ? rule.at("div").get<int64_t>() : 1;
    for (const json& term : rule.at("terms")) {
      if (!term.is_array() || term.size() != 2 || !whole(term[0]) || !term[1].is_string()) {
        throw Error(here + ".terms: expected [<whole number>, \"<symbol>\"] pairs, got " +
                    term.dump());
      }
      const std::string other = term[1].get<std::string>();
      if (!symbols.count(other)) throw Error(here + ".terms: '" + other + "' is not a symbol");
      if (extents.contains(other)) {
        throw Error(here + ".terms: '" + other + "' is itself computed (rules read given "
                           "symbols only)");
      }
    }
    for (const Workload& workload : task.workloads) {
      int64_t value = rule.at("const").get<int64_t>();
      for (const json& term : rule.at("terms")) {
        value += term[0].get<int64_t>() * workload.dims.at(term[1].get<std::string>());
      }
      value = floor_div(value, div);
      const int64_t bound = workload.dims.at(symbol);
      if (value != bound) {
        throw Error(here + ": the rule gives " + std::to_string(value) + " at workload '" +
                    workload.name + "', which binds " + symbol + " = " + std::to_string(bound));
      }
    }
  }
}

}  // namespace kforge

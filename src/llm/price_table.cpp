#include "llm/price_table.h"

#include <toml++/toml.h>

#include "common/error.h"

namespace kforge::llm {

PriceTable PriceTable::load(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ": " + std::string(e.description()));
  }
  const toml::table* models = table["models"].as_table();
  if (models == nullptr) throw Error(path + ": models: expected a table of models");
  std::map<std::string, ModelPrice> prices;
  for (const auto& [name, node] : *models) {
    std::string where = path + ": models." + std::string(name.str());
    const toml::table* entry = node.as_table();
    if (entry == nullptr) throw Error(where + ": expected a table");
    ModelPrice price;
    auto input = (*entry)["input_usd_per_mtok"].value<double>();
    auto output = (*entry)["output_usd_per_mtok"].value<double>();
    if (!input || *input < 0) throw Error(where + ".input_usd_per_mtok: expected a number >= 0");
    if (!output || *output < 0) throw Error(where + ".output_usd_per_mtok: expected a number >= 0");
    price.input_usd_per_mtok = *input;
    price.output_usd_per_mtok = *output;
    prices[std::string(name.str())] = price;
  }
  return PriceTable(std::move(prices));
}

std::optional<ModelPrice> PriceTable::price(const std::string& model) const {
  if (auto exact = prices_.find(model); exact != prices_.end()) return exact->second;
  std::optional<ModelPrice> best;
  size_t best_length = 0;
  for (const auto& [key, price] : prices_) {
    if (key.size() > best_length && model.compare(0, key.size(), key) == 0) {
      best = price;
      best_length = key.size();
    }
  }
  return best;
}

double PriceTable::cost_usd(const std::string& model, const TokenUsage& usage) const {
  std::optional<ModelPrice> p = price(model);
  if (!p) return 0.0;
  return (static_cast<double>(usage.prompt_tokens) * p->input_usd_per_mtok +
          static_cast<double>(usage.completion_tokens) * p->output_usd_per_mtok) *
         1e-6;
}

}  // namespace kforge::llm

// What tokens cost: an editable TOML table (knowledge/llm_prices.toml) of USD per million
// tokens per model, so that a run's cost can be shown and capped (--llm-budget-usd).
//
//   [models."deepseek-reasoner"]
//   input_usd_per_mtok = 0.55     # prompt tokens
//   output_usd_per_mtok = 2.19    # completion tokens, reasoning tokens included
//
// A model matches its exact key, else the longest key that is a prefix of its name
// ("gpt-4o" prices "gpt-4o-2024-08-06").
#pragma once

#include <map>
#include <optional>
#include <string>

#include "llm/chat.h"

namespace kforge::llm {

struct ModelPrice {
  double input_usd_per_mtok = 0.0;
  double output_usd_per_mtok = 0.0;
};

class PriceTable {
 public:
  /// Reads the table. Throws Error naming the file and key when malformed or negative.
  static PriceTable load(const std::string& path);
  /// A table from explicit entries (tests).
  explicit PriceTable(std::map<std::string, ModelPrice> prices = {}) : prices_(std::move(prices)) {}

  /// The price of `model`, or nullopt when the table has none.
  std::optional<ModelPrice> price(const std::string& model) const;
  /// Cost in USD of one exchange; 0 when the model has no price.
  double cost_usd(const std::string& model, const TokenUsage& usage) const;

 private:
  std::map<std::string, ModelPrice> prices_;
};

}  // namespace kforge::llm

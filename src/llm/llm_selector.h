// HTAM's local choice made by the model: given the state summary s_t, the chosen direction and
// its candidate strategies with their evidence, the model answers
//   {"strategy_id": "<id>", "reason": "<one sentence>"}
// which is validated (JSON, a known id). Anything else (no answer, an error, a budget stop, an
// unknown id) falls back to the offline selector (UCB1) and is logged. A single candidate is
// taken without asking.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "llm/chat.h"
#include "llm/prompt_builder.h"
#include "memory/policy.h"
#include "memory/store.h"

namespace kforge::llm {

/// s_t as the selector sees it: a summary and the directions chosen so far (oldest first).
struct SearchState {
  std::string summary;
  std::vector<std::string> prefix;
};

/// Receives one line for the console and one event for events.jsonl.
using LlmLogSink = std::function<void(const std::string& line, const nlohmann::json& event)>;

/// The model's pick, validated against `candidates`: index set, or error set.
struct SelectorAnswer {
  std::optional<size_t> index;
  std::string reason;
  std::string error;  // why the answer is invalid
};

/// Parses a selector reply: a JSON object bare, in a ```json fence, or the last {...} in prose
/// (after any <think> block). The id must be one of `candidates`' ids.
SelectorAnswer parse_selector_answer(const std::string& reply,
                                     std::span<const memory::Strategy> candidates);

class LlmStrategySelector final : public memory::StrategySelector {
 public:
  /// Keeps references to `client`, `prompts` and `store`; `state` is called once per choice.
  LlmStrategySelector(ChatClient& client, const PromptBuilder& prompts, std::string model,
                      std::optional<double> temperature, memory::Store& store,
                      std::function<SearchState()> state, LlmLogSink log);
  /// Asks the model to pick among `arms` (the policy's applicable strategies of one direction);
  /// falls back to UCB1 over the same arms and `state` when the answer is missing or invalid.
  memory::StrategyPick select(std::span<const memory::StrategyArm> arms,
                              const memory::StateSummary& state, std::mt19937_64& rng) override;

  int fallbacks() const { return fallbacks_; }

 private:
  memory::StrategyPick fall_back(std::span<const memory::StrategyArm> arms,
                                 const memory::StateSummary& state, std::mt19937_64& rng,
                                 const std::string& why);

  ChatClient& client_;
  const PromptBuilder& prompts_;
  std::string model_;
  std::optional<double> temperature_;
  memory::Store& store_;
  std::function<SearchState()> state_;
  LlmLogSink log_;
  memory::Ucb1Selector fallback_;
  int fallbacks_ = 0;
};

}  // namespace kforge::llm

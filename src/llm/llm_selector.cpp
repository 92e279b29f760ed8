#include "llm/llm_selector.h"

#include <fmt/format.h>

namespace kforge::llm {
namespace {

// The JSON object text of a reply: a fenced block's content, else the last balanced {...}.
std::string json_text(std::string reply) {
  if (size_t think = reply.find("</think>"); think != std::string::npos)
    reply = reply.substr(think + 8);
  if (size_t fence = reply.find("```"); fence != std::string::npos) {
    size_t start = reply.find('\n', fence);
    size_t end = start == std::string::npos ? std::string::npos : reply.find("```", start);
    if (end != std::string::npos) return reply.substr(start + 1, end - start - 1);
  }
  size_t close = reply.rfind('}');
  if (close == std::string::npos) return reply;
  int depth = 0;
  for (size_t i = close + 1; i-- > 0;) {
    if (reply[i] == '}') ++depth;
    if (reply[i] == '{' && --depth == 0) return reply.substr(i, close - i + 1);
  }
  return reply;
}

}  // namespace

SelectorAnswer parse_selector_answer(const std::string& reply,
                                     std::span<const memory::Strategy> candidates) {
  SelectorAnswer answer;
  nlohmann::json json = nlohmann::json::parse(json_text(reply), nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    answer.error = "the answer is not a JSON object";
    return answer;
  }
  auto id = json.find("strategy_id");
  if (id == json.end() || !id->is_string()) {
    answer.error = "the answer has no string \"strategy_id\"";
    return answer;
  }
  if (auto reason = json.find("reason"); reason != json.end() && reason->is_string()) {
    answer.reason = reason->get<std::string>();
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].id == id->get<std::string>()) answer.index = i;
  }
  if (!answer.index)
    answer.error = "\"" + id->get<std::string>() + "\" is not one of the candidates";
  return answer;
}

LlmStrategySelector::LlmStrategySelector(ChatClient& client, const PromptBuilder& prompts,
                                         std::string model, std::optional<double> temperature,
                                         memory::Store& store, std::function<SearchState()> state,
                                         LlmLogSink log)
    : client_(client),
      prompts_(prompts),
      model_(std::move(model)),
      temperature_(temperature),
      store_(store),
      state_(std::move(state)),
      log_(std::move(log)) {}

memory::StrategyPick LlmStrategySelector::fall_back(std::span<const memory::StrategyArm> arms,
                                                    const memory::StateSummary& state,
                                                    std::mt19937_64& rng, const std::string& why) {
  ++fallbacks_;
  memory::StrategyPick pick = fallback_.select(arms, state, rng);
  const memory::Strategy& chosen = arms[pick.index].strategy;
  log_(fmt::format("    llm selector: {}; UCB1 chose {}", why, chosen.id),
       {{"event", "llm_selector_fallback"},
        {"direction", chosen.direction_id},
        {"reason", why},
        {"strategy", chosen.id}});
  pick.explanation = "LLM selector fell back to UCB1 (" + why + "): " + pick.explanation;
  return pick;
}

memory::StrategyPick LlmStrategySelector::select(std::span<const memory::StrategyArm> arms,
                                                 const memory::StateSummary& summary,
                                                 std::mt19937_64& rng) {
  if (arms.size() == 1) return {0, "the only applicable strategy"};
  std::vector<memory::Strategy> candidates;
  for (const memory::StrategyArm& arm : arms) candidates.push_back(arm.strategy);
  StrategyContext context;
  for (const memory::Direction& d : store_.directions(prompts_.backend())) {
    if (d.id == candidates[0].direction_id) context.direction = d;
  }
  SearchState state = state_();
  context.prefix = state.prefix;
  if (!state.prefix.empty()) context.edge = store_.edge(state.prefix.back(), context.direction.id);
  ChatRequest request;
  request.model = model_;
  request.temperature = temperature_;
  request.messages = prompts_.select(state.summary, context, candidates);
  request.purpose = "select";
  // What the question was about, independent of the numbers in the prompt (replay matches it).
  request.label = context.direction.id + ":";
  for (size_t i = 0; i < candidates.size(); ++i) request.label += (i ? "," : "") + candidates[i].id;
  ChatResult result = client_.complete(request);
  if (!result.ok()) {
    return fall_back(
        arms, summary, rng,
        "no answer (" + to_string(result.error.kind) + ": " + result.error.message + ")");
  }
  SelectorAnswer answer = parse_selector_answer(result.response->content, candidates);
  if (!answer.index) return fall_back(arms, summary, rng, "invalid answer: " + answer.error);
  log_("", {{"event", "llm_selector"},
            {"direction", context.direction.id},
            {"strategy", candidates[*answer.index].id},
            {"reason", answer.reason}});
  return {*answer.index, "LLM chose " + candidates[*answer.index].id + ": " + answer.reason};
}

}  // namespace kforge::llm

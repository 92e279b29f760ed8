// A ChatClient decorator that makes LLM use visible, reproducible and capped:
//   - transcript: every exchange is written to <transcript_dir>/NNN-<purpose>.json (request
//     body, answer, reasoning, usage, latency, cost, or the error). Only the request body is
//     written: the API key and the headers never reach this layer.
//   - cache: each answer is stored as <transcript_dir>/cache/<request_hash>.json; an identical
//     request later in the run is answered from it.
//   - replay: with a replay_dir (a previous run's llm/ folder) no request reaches the network.
//     An answer is found by the request's hash in <replay_dir>/cache/, else, because prompts
//     carry measured times that differ from run to run, by what it was about: the next unused
//     recorded answer with the same purpose and label, in recorded order. A miss throws Error
//     (the replayed search took another path: continuing would no longer be a replay).
//   - budget: before each request, when the cost spent (replayed answers count their recorded
//     cost, so a replay stops where the run stopped) has reached budget_usd, the request is
//     refused with `budget_exhausted`. Requests already in flight may overshoot by at most
//     max_concurrency - 1 answers.
#pragma once

#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "llm/chat.h"
#include "llm/price_table.h"

namespace kforge::llm {

struct RecorderOptions {
  std::filesystem::path transcript_dir;  // e.g. <run>/llm; created when missing
  std::filesystem::path replay_dir;      // empty: live
  double budget_usd = 0.0;               // <= 0: no cap
};

/// Totals so far, for the summary and result.json.
struct LlmUsage {
  int requests = 0;  // answered (live or replayed)
  int failures = 0;  // errors of any kind
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double cost_usd = 0.0;
  double latency_s = 0.0;  // summed over answers
};

class RecordingChatClient final : public ChatClient {
 public:
  /// `live` may be null only when options.replay_dir is set. Throws Error when replay_dir has
  /// no cache/ folder or the transcript folder cannot be created.
  RecordingChatClient(ChatClient* live, PriceTable prices, RecorderOptions options);
  /// Failures are ChatErrors, except a replay miss, which throws Error (see above).
  ChatResult complete(const ChatRequest& request) override;

  LlmUsage usage() const;
  /// True once the spent cost has reached a positive budget.
  bool budget_exhausted() const;
  double budget_usd() const { return options_.budget_usd; }

 private:
  std::optional<ChatResponse> cached(const std::filesystem::path& dir, const std::string& hash);
  /// Replay lookup: by hash, else by purpose and label in recorded order.
  std::optional<ChatResponse> replayed(const ChatRequest& request, const std::string& hash);
  void index_replay_transcripts();
  void write_transcript(const ChatRequest& request, const std::string& hash,
                        const ChatResult& result);

  ChatClient* live_;
  PriceTable prices_;
  RecorderOptions options_;
  mutable std::mutex mutex_;
  LlmUsage usage_;
  int next_index_ = 0;
  struct Recorded {
    std::string hash;
    ChatResponse response;
    bool used = false;
  };
  std::map<std::string, std::deque<Recorded>> recorded_;  // by "purpose|label", in order
};

/// ChatResponse <-> JSON, as stored in the cache and the transcript.
nlohmann::json response_to_json(const ChatResponse& response);
ChatResponse response_from_json(const nlohmann::json& json);

}  // namespace kforge::llm

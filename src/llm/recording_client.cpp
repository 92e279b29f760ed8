#include "llm/recording_client.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "common/files.h"

namespace kforge::llm {
namespace fs = std::filesystem;

nlohmann::json response_to_json(const ChatResponse& r) {
  return {{"content", r.content},
          {"reasoning", r.reasoning},
          {"finish_reason", r.finish_reason},
          {"model", r.model},
          {"usage",
           {{"prompt_tokens", r.usage.prompt_tokens},
            {"completion_tokens", r.usage.completion_tokens},
            {"reasoning_tokens", r.usage.reasoning_tokens}}},
          {"latency_s", r.latency_s},
          {"attempts", r.attempts},
          {"cost_usd", r.cost_usd}};
}

ChatResponse response_from_json(const nlohmann::json& j) {
  ChatResponse r;
  r.content = j.at("content").get<std::string>();
  r.reasoning = j.value("reasoning", "");
  r.finish_reason = j.value("finish_reason", "");
  r.model = j.value("model", "");
  const nlohmann::json& usage = j.at("usage");
  r.usage.prompt_tokens = usage.value("prompt_tokens", int64_t{0});
  r.usage.completion_tokens = usage.value("completion_tokens", int64_t{0});
  r.usage.reasoning_tokens = usage.value("reasoning_tokens", int64_t{0});
  r.latency_s = j.value("latency_s", 0.0);
  r.attempts = j.value("attempts", 1);
  r.cost_usd = j.value("cost_usd", 0.0);
  return r;
}

RecordingChatClient::RecordingChatClient(ChatClient* live, PriceTable prices,
                                         RecorderOptions options)
    : live_(live), prices_(std::move(prices)), options_(std::move(options)) {
  if (live_ == nullptr && options_.replay_dir.empty()) {
    throw Error("RecordingChatClient: no live client and no replay directory");
  }
  if (!options_.replay_dir.empty() && !fs::is_directory(options_.replay_dir / "cache")) {
    throw Error("--replay: " + (options_.replay_dir / "cache").string() +
                " not found (give the directory of a previous run made with --generator llm)");
  }
  std::error_code ec;
  fs::create_directories(options_.transcript_dir / "cache", ec);
  if (ec) throw Error(options_.transcript_dir.string() + ": cannot create: " + ec.message());
  // A resumed run writes into the same folder: number its exchanges after the recorded ones.
  for (const auto& entry : fs::directory_iterator(options_.transcript_dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") ++next_index_;
  }
  if (!options_.replay_dir.empty()) index_replay_transcripts();
}

namespace {
std::string replay_key(const std::string& purpose, const std::string& label) {
  return purpose + "|" + label;
}
}  // namespace

void RecordingChatClient::index_replay_transcripts() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(options_.replay_dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // NNNN- prefixes: recorded order
  for (const fs::path& file : files) {
    nlohmann::json entry =
        with_context(file.string(), [&] { return nlohmann::json::parse(read_file(file)); });
    if (!entry.contains("response")) continue;
    Recorded recorded{entry.value("request_hash", ""), response_from_json(entry["response"]),
                      false};
    recorded_[replay_key(entry.value("purpose", ""), entry.value("label", ""))].push_back(recorded);
  }
}

std::optional<ChatResponse> RecordingChatClient::replayed(const ChatRequest& request,
                                                          const std::string& hash) {
  std::lock_guard lock(mutex_);
  std::deque<Recorded>& same = recorded_[replay_key(request.purpose, request.label)];
  Recorded* pick = nullptr;
  for (Recorded& r : same) {
    if (!r.used && r.hash == hash) pick = &r;
  }
  // Without a label nothing says two different requests asked the same question.
  for (Recorded& r : same) {
    if (pick == nullptr && !r.used && !request.label.empty()) pick = &r;
  }
  if (pick != nullptr) {
    pick->used = true;
    ChatResponse response = pick->response;
    response.from_cache = true;
    return response;
  }
  if (auto hit = cached(options_.replay_dir, hash)) return hit;
  return std::nullopt;
}

std::optional<ChatResponse> RecordingChatClient::cached(const fs::path& dir,
                                                        const std::string& hash) {
  fs::path path = dir / "cache" / (hash + ".json");
  if (!fs::exists(path)) return std::nullopt;
  ChatResponse response = with_context(
      path.string(), [&] { return response_from_json(nlohmann::json::parse(read_file(path))); });
  response.from_cache = true;
  return response;
}

ChatResult RecordingChatClient::complete(const ChatRequest& request) {
  const std::string hash = request_hash(request);
  ChatResult result;
  if (budget_exhausted()) {
    result.error = {ChatErrorKind::budget_exhausted,
                    fmt::format("LLM budget of ${:.4f} reached (spent ${:.4f}); no request sent",
                                options_.budget_usd, usage().cost_usd),
                    0, 0};
    return result;
  }
  if (!options_.replay_dir.empty()) {
    result.response = replayed(request, hash);
    if (!result.response) {
      // Not a step failure: the replay is no longer the recorded run, so it must not go on
      // looking like one. The optimizer keeps what was evaluated and says why it stopped.
      throw Error("--replay: no recorded answer for this " + request.purpose + " request (" +
                  (request.label.empty() ? "" : request.label + ", ") + "hash " +
                  hash.substr(0, 12) + ") in " + options_.replay_dir.string() +
                  "; the replayed search left the recorded path (different task, options, "
                  "prompts, memory or timings)");
    }
  } else if (auto hit = cached(options_.transcript_dir, hash)) {
    result.response = std::move(hit);
  } else {
    result = live_->complete(request);
    if (result.ok()) {
      result.response->cost_usd = prices_.cost_usd(request.model, result.response->usage);
      write_file_atomically(options_.transcript_dir / "cache" / (hash + ".json"),
                            response_to_json(*result.response).dump(2) + "\n");
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (result.ok()) {
      ++usage_.requests;
      usage_.prompt_tokens += result.response->usage.prompt_tokens;
      usage_.completion_tokens += result.response->usage.completion_tokens;
      usage_.cost_usd += result.response->cost_usd;
      usage_.latency_s += result.response->latency_s;
    } else {
      ++usage_.failures;
    }
  }
  write_transcript(request, hash, result);
  return result;
}

void RecordingChatClient::write_transcript(const ChatRequest& request, const std::string& hash,
                                           const ChatResult& result) {
  int index = 0;
  {
    std::lock_guard lock(mutex_);
    index = next_index_++;
  }
  nlohmann::json entry = {{"index", index},
                          {"purpose", request.purpose},
                          {"label", request.label},
                          {"request_hash", hash},
                          {"request", request_body(request)}};
  if (result.ok()) {
    entry["response"] = response_to_json(*result.response);
    entry["from_cache"] = result.response->from_cache;
  } else {
    entry["error"] = {{"kind", to_string(result.error.kind)},
                      {"message", result.error.message},
                      {"http_status", result.error.http_status},
                      {"attempts", result.error.attempts}};
  }
  std::string name =
      fmt::format("{:04d}-{}.json", index, request.purpose.empty() ? "chat" : request.purpose);
  write_file_atomically(options_.transcript_dir / name, entry.dump(2) + "\n");
}

LlmUsage RecordingChatClient::usage() const {
  std::lock_guard lock(mutex_);
  return usage_;
}

bool RecordingChatClient::budget_exhausted() const {
  std::lock_guard lock(mutex_);
  return options_.budget_usd > 0 && usage_.cost_usd >= options_.budget_usd;
}

}  // namespace kforge::llm

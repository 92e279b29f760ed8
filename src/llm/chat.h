// The LLM client seam: one OpenAI-compatible Chat Completions exchange as plain values, and the
// narrow interface the generation plane talks to. The libcurl implementation lives in
// curl_chat_client.h; recording, caching, replay and the cost budget are decorators
// (recording_client.h); tests hand the generator scripted fakes.
//
// Wire format: OpenAI "Create chat completion" (POST <base_url>/chat/completions), as spoken by
// hosted APIs and by vLLM, SGLang, llama.cpp server and Ollama.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kforge::llm {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

/// One request. `purpose` and `label` are kforge's own (for the transcript and replay), never
/// sent. `label` names what the question is about independently of the numbers in the prompt
/// (the proposal id; the direction and its candidate strategies), so a replay can find it.
struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  std::optional<double> temperature;
  std::optional<int> max_tokens;
  std::string purpose;  // "generate" | "repair" | "select"
  std::string label;    // e.g. the strategy and parent it is about
};

/// The JSON body sent on the wire (model, messages, temperature, max_tokens; nothing else).
nlohmann::json request_body(const ChatRequest& request);

/// SHA-256 of the canonical request body: the cache key. Independent of the endpoint and key,
/// so a replay works from another machine.
std::string request_hash(const ChatRequest& request);

/// Token use as reported by the server's `usage` object (0 when absent).
struct TokenUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = 0;  // completion_tokens_details.reasoning_tokens, when reported
};

/// A successful answer.
struct ChatResponse {
  std::string content;        // choices[0].message.content
  std::string reasoning;      // choices[0].message.reasoning_content or .reasoning, if any
  std::string finish_reason;  // "stop", "length", ...
  std::string model;          // as the server reports it
  TokenUsage usage;
  double latency_s = 0.0;   // wall time of the successful attempt
  int attempts = 1;         // HTTP attempts made, retries included
  double cost_usd = 0.0;    // from the price table (0 when the model has no price)
  bool from_cache = false;  // answered from the response cache (replay)
};

/// Parses a Chat Completions response body. Throws Error naming what is missing or malformed.
ChatResponse parse_response_body(const std::string& body);

/// Why an exchange failed. Every failure is a value: the step fails, the run goes on.
enum class ChatErrorKind {
  not_configured,    // no endpoint
  unauthorized,      // 401/403: the endpoint refused the key
  model_not_found,   // 404
  bad_request,       // other 4xx (context too long, bad parameter)
  server_error,      // 5xx or 429 after every retry
  network,           // connection refused/dropped, DNS, TLS, after every retry
  timeout,           // past the total timeout, after every retry
  malformed,         // the body is not a Chat Completions response
  cancelled,         // Ctrl-C
  budget_exhausted,  // the cost budget is spent; no request was sent
};

std::string to_string(ChatErrorKind kind);

struct ChatError {
  ChatErrorKind kind = ChatErrorKind::network;
  std::string message;  // one line for the run log, naming the endpoint/model and what to do
  int http_status = 0;  // 0 when no HTTP status was received
  int attempts = 0;
};

/// Either a response or an error.
struct ChatResult {
  std::optional<ChatResponse> response;
  ChatError error;  // meaningful when !response
  bool ok() const { return response.has_value(); }
};

/// Sends one chat request. Implementations are thread-safe (the generator asks for several
/// candidates at once) and never throw for a failed exchange: failures are ChatErrors.
class ChatClient {
 public:
  virtual ~ChatClient() = default;
  virtual ChatResult complete(const ChatRequest& request) = 0;
};

}  // namespace kforge::llm

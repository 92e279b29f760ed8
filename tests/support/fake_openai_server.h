// A loopback OpenAI-compatible Chat Completions server for tests (cpp-httplib), speaking
// POST /v1/chat/completions. Each request is answered by the next scripted reply, or by a
// responder function when the script is empty. Replies can be real answers (content plus a
// separate reasoning field and token usage) or faults: an HTTP error with an optional
// Retry-After, a malformed JSON body, a connection dropped in the middle of the body, or an
// answer delayed past the client's timeout.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace kforge::testing {

struct ScriptedReply {
  enum class Kind { answer, http_error, malformed_json, drop_mid_body };
  Kind kind = Kind::answer;
  std::string content;      // choices[0].message.content
  std::string reasoning;    // message.reasoning_content (empty: field absent)
  int status = 200;         // for http_error
  std::string retry_after;  // Retry-After header value for http_error (empty: none)
  double delay_s = 0.0;     // wait before answering (slow replies)
  int64_t prompt_tokens = 1000;
  int64_t completion_tokens = 500;
  std::string finish_reason = "stop";

  static ScriptedReply answer(std::string content, std::string reasoning = "");
  static ScriptedReply error(int status, std::string retry_after = "");
  static ScriptedReply malformed();
  static ScriptedReply dropped();
  static ScriptedReply slow(double delay_s, std::string content);
};

class FakeOpenAiServer {
 public:
  using Responder = std::function<ScriptedReply(const nlohmann::json& request)>;

  /// Listens on 127.0.0.1 at a free port, in a background thread.
  FakeOpenAiServer();
  ~FakeOpenAiServer();
  FakeOpenAiServer(const FakeOpenAiServer&) = delete;
  FakeOpenAiServer& operator=(const FakeOpenAiServer&) = delete;

  /// "http://127.0.0.1:<port>/v1"
  std::string base_url() const;
  /// Appends replies to the script (consumed first, in order).
  void script(std::vector<ScriptedReply> replies);
  /// Answers requests once the script is empty (default: HTTP 500 "script exhausted").
  void set_responder(Responder responder);
  /// Requests without "Authorization: Bearer <key>" get 401 (empty: no check).
  void require_key(std::string key);
  /// Requests for another model get 404 (empty: any model).
  void serve_models(std::set<std::string> models);

  /// Bodies of every request received, in order.
  std::vector<nlohmann::json> requests() const;
  /// Authorization header values received, in order ("" when absent).
  std::vector<std::string> authorizations() const;

 private:
  ScriptedReply next(const nlohmann::json& request);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::deque<ScriptedReply> script_;
  Responder responder_;
  std::string key_;
  std::set<std::string> models_;
  std::vector<nlohmann::json> requests_;
  std::vector<std::string> authorizations_;
};

/// The reply text of the corpus file tests/llm_replies/<name>.
std::string corpus_reply(const std::string& name);

}  // namespace kforge::testing

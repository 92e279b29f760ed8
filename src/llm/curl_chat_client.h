// The real ChatClient: OpenAI-compatible Chat Completions over HTTP(S) with libcurl.
//
// Per request: connect and total timeouts (LlmConfig), at most max_concurrency requests in
// flight (callers beyond that wait), and retries on 429, 5xx, dropped connections, timeouts and
// truncated/malformed bodies, waiting min(backoff_max_s, max(Retry-After, jittered backoff))
// between attempts. The backoff is "full jitter" (AWS Architecture Blog, "Exponential Backoff
// And Jitter", 2015): uniform in [0, backoff_initial_s * 2^retry]. 401/403/404/other 4xx are
// not retried. Cancellation: when *cancel becomes true, the transfer in progress is aborted
// from curl's progress callback and waits are cut short; the result is a `cancelled` error.
// The API key goes only into the Authorization header of the outgoing request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "llm/chat.h"
#include "llm/llm_config.h"

namespace kforge::llm {

class CurlChatClient final : public ChatClient {
 public:
  /// `cancel` may be null (never cancelled); it must outlive the client.
  explicit CurlChatClient(LlmConfig config, const std::atomic<bool>* cancel = nullptr);
  ChatResult complete(const ChatRequest& request) override;

 private:
  struct Attempt;
  Attempt attempt(const std::string& body);
  /// Sleeps `seconds` in short slices; false when cancelled meanwhile.
  bool wait(double seconds) const;
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  LlmConfig config_;
  std::string url_;
  const std::atomic<bool>* cancel_;
  std::mutex slots_mutex_;
  std::condition_variable slots_free_;
  int in_flight_ = 0;
};

/// Seconds to wait from a Retry-After header value: delta-seconds or an HTTP-date (RFC 9110
/// section 10.2.3), relative to `now_epoch_s`. nullopt when absent or unparseable.
std::optional<double> parse_retry_after(const std::string& value, double now_epoch_s);

}  // namespace kforge::llm

#include "llm/curl_chat_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "common/error.h"

namespace kforge::llm {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  std::string line(data, size * count);
  static const std::string kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string head = line.substr(0, kName.size());
    std::transform(head.begin(), head.end(), head.begin(), ::tolower);
    if (head == kName) {
      std::string value = line.substr(kName.size());
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t\r\n") + 1);
      *static_cast<std::string*>(user) = value;
    }
  }
  return size * count;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel != nullptr && cancel->load() ? 1 : 0;  // non-zero aborts the transfer
}

double now_epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Transient failures worth another attempt.
bool transient_curl_error(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string excerpt(const std::string& body) {
  // The server's own error message when it sent one, else the body's start.
  nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_discarded() && json.is_object() && json.contains("error")) {
    const auto& e = json["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  std::string text = body.substr(0, 200);
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace

std::optional<double> parse_retry_after(const std::string& value, double now) {
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), ::isdigit)) return std::stod(value);
  time_t when = curl_getdate(value.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  return std::max(0.0, static_cast<double>(when) - now);
}

struct CurlChatClient::Attempt {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string retry_after;
  std::string curl_message;
  double seconds = 0.0;
};

CurlChatClient::CurlChatClient(LlmConfig config, const std::atomic<bool>* cancel)
    : config_(std::move(config)), url_(chat_completions_url(config_)), cancel_(cancel) {
  global_init();
}

CurlChatClient::Attempt CurlChatClient::attempt(const std::string& body) {
  Attempt result;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw Error("curl_easy_init failed");
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json");
  std::string authorization;
  if (!config_.api_key.empty()) {
    authorization = "Authorization: Bearer " + config_.api_key;
    headers = curl_slist_append(headers, authorization.c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &result.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &result.retry_after);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, cancel_);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout_s * 1000));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout_s * 1000));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based DNS timeouts
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // whatever this libcurl decodes
  auto started = std::chrono::steady_clock::now();
  result.code = curl_easy_perform(h);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &result.status);
  result.curl_message = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(result.code);
  return result;
}

bool CurlChatClient::wait(double seconds) const {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (cancelled()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !cancelled();
}

ChatResult CurlChatClient::complete(const ChatRequest& request) {
  {
    std::unique_lock lock(slots_mutex_);
    slots_free_.wait(lock, [&] { return in_flight_ < config_.max_concurrency; });
    ++in_flight_;
  }
  struct Release {
    CurlChatClient* self;
    ~Release() {
      std::lock_guard lock(self->slots_mutex_);
      --self->in_flight_;
      self->slots_free_.notify_one();
    }
  } release{this};

  const std::string body = request_body(request).dump();
  thread_local std::mt19937_64 jitter(std::random_device{}());
  ChatResult result;
  ChatError& error = result.error;
  for (int attempt_index = 0; attempt_index <= config_.max_retries; ++attempt_index) {
    if (cancelled()) {
      error = {ChatErrorKind::cancelled, "cancelled (interrupt)", 0, attempt_index};
      return result;
    }
    Attempt a = attempt(body);
    error.attempts = attempt_index + 1;
    error.http_status = static_cast<int>(a.status);
    bool retry = false;
    if (a.code == CURLE_ABORTED_BY_CALLBACK || cancelled()) {
      error.kind = ChatErrorKind::cancelled;
      error.message = "cancelled (interrupt)";
      return result;
    } else if (a.code != CURLE_OK) {
      retry = transient_curl_error(a.code);
      error.kind =
          a.code == CURLE_OPERATION_TIMEDOUT ? ChatErrorKind::timeout : ChatErrorKind::network;
      error.message = url_ + ": " + a.curl_message;
    } else if (a.status == 401 || a.status == 403) {
      error.kind = ChatErrorKind::unauthorized;
      error.message = url_ + " refused the API key (HTTP " + std::to_string(a.status) + ": " +
                      excerpt(a.body) + "); check KFORGE_LLM_API_KEY";
      return result;
    } else if (a.status == 404) {
      error.kind = ChatErrorKind::model_not_found;
      error.message = "model '" + request.model + "' or endpoint not found at " + url_ +
                      " (HTTP 404: " + excerpt(a.body) +
                      "); check KFORGE_LLM_MODEL and KFORGE_LLM_BASE_URL (it ends before "
                      "/chat/completions, e.g. .../v1)";
      return result;
    } else if (a.status == 429 || a.status >= 500) {
      retry = true;
      error.kind = ChatErrorKind::server_error;
      error.message = url_ + ": HTTP " + std::to_string(a.status) + ": " + excerpt(a.body);
    } else if (a.status >= 400) {
      error.kind = ChatErrorKind::bad_request;
      error.message = url_ + ": HTTP " + std::to_string(a.status) + ": " + excerpt(a.body);
      return result;
    } else {
      try {
        ChatResponse response = parse_response_body(a.body);
        response.latency_s = a.seconds;
        response.attempts = attempt_index + 1;
        result.response = std::move(response);
        return result;
      } catch (const Error& e) {
        // A body cut short by a proxy or a dying server reads as malformed: try again.
        retry = true;
        error.kind = ChatErrorKind::malformed;
        error.message = url_ + ": " + e.what();
      }
    }
    if (!retry || attempt_index == config_.max_retries) break;
    double cap =
        std::min(config_.backoff_max_s, config_.backoff_initial_s * std::ldexp(1.0, attempt_index));
    double backoff = cap * (static_cast<double>(jitter() >> 11) * 0x1.0p-53);
    double delay = backoff;
    if (auto after = parse_retry_after(a.retry_after, now_epoch_s()))
      delay = std::max(delay, *after);
    delay = std::min(delay, config_.backoff_max_s);
    if (!wait(delay)) {
      error = {ChatErrorKind::cancelled, "cancelled (interrupt)", error.http_status,
               attempt_index + 1};
      return result;
    }
  }
  error.message += " (after " + std::to_string(error.attempts) + " attempt" +
                   (error.attempts == 1 ? "" : "s") + ")";
  return result;
}

}  // namespace kforge::llm

// The libcurl client against the loopback fake server: answers, reasoning, usage, and every
// scripted fault (429 + Retry-After, 500, malformed JSON, dropped connection, slow reply,
// refused key, unknown model, refused connection), cancellation and the concurrency limit.
#include "llm/curl_chat_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "support/fake_openai_server.h"

namespace kforge::llm {
namespace {

using kforge::testing::FakeOpenAiServer;
using kforge::testing::ScriptedReply;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class CurlChatClientTest : public ::testing::Test {
 protected:
  LlmConfig config() {
    LlmConfig c;
    c.base_url = server_.base_url();
    c.model = "kforge-fake";
    c.api_key = "sk-test";
    c.backoff_initial_s = 0.01;  // fast retries; Retry-After tests override the wait
    c.backoff_max_s = 5.0;
    c.max_retries = 2;
    c.request_timeout_s = 10.0;
    return c;
  }
  ChatRequest request() {
    ChatRequest r;
    r.model = "kforge-fake";
    r.messages = {{"user", "write a kernel"}};
    r.temperature = 0.5;
    return r;
  }
  FakeOpenAiServer server_;
};

TEST_F(CurlChatClientTest, CapturesAnswerReasoningUsageAndLatency) {
  server_.script({ScriptedReply::answer("the kernel", "first I think")});
  CurlChatClient client(config());
  ChatResult result = client.complete(request());
  ASSERT_TRUE(result.ok()) << result.error.message;
  EXPECT_EQ(result.response->content, "the kernel");
  EXPECT_EQ(result.response->reasoning, "first I think");
  EXPECT_EQ(result.response->usage.prompt_tokens, 1000);
  EXPECT_EQ(result.response->usage.completion_tokens, 500);
  EXPECT_EQ(result.response->attempts, 1);
  EXPECT_GT(result.response->latency_s, 0.0);
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(server_.requests()[0]["model"], "kforge-fake");
  EXPECT_EQ(server_.requests()[0]["messages"][0]["content"], "write a kernel");
  EXPECT_EQ(server_.authorizations()[0], "Bearer sk-test");
}

TEST_F(CurlChatClientTest, NoKeyMeansNoAuthorizationHeader) {
  server_.script({ScriptedReply::answer("ok")});
  LlmConfig c = config();
  c.api_key.clear();
  CurlChatClient client(c);
  ASSERT_TRUE(client.complete(request()).ok());
  EXPECT_EQ(server_.authorizations()[0], "");
}

TEST_F(CurlChatClientTest, RateLimitIsRetriedAfterRetryAfter) {
  server_.script({ScriptedReply::error(429, "1"), ScriptedReply::answer("ok")});
  CurlChatClient client(config());
  auto start = Clock::now();
  ChatResult result = client.complete(request());
  ASSERT_TRUE(result.ok()) << result.error.message;
  EXPECT_EQ(result.response->attempts, 2);
  EXPECT_GE(seconds_since(start), 0.95);  // Retry-After: 1 overrides the 10 ms backoff
}

TEST_F(CurlChatClientTest, ServerErrorsAreRetriedThenReported) {
  server_.script({ScriptedReply::error(500), ScriptedReply::answer("ok")});
  CurlChatClient client(config());
  ChatResult ok = client.complete(request());
  ASSERT_TRUE(ok.ok()) << ok.error.message;
  EXPECT_EQ(ok.response->attempts, 2);

  server_.script({ScriptedReply::error(503), ScriptedReply::error(502), ScriptedReply::error(500)});
  ChatResult failed = client.complete(request());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error.kind, ChatErrorKind::server_error);
  EXPECT_EQ(failed.error.attempts, 3);  // the first try and max_retries = 2
  EXPECT_EQ(failed.error.http_status, 500);
  EXPECT_NE(failed.error.message.find("after 3 attempts"), std::string::npos)
      << failed.error.message;
}

TEST_F(CurlChatClientTest, MalformedJsonIsRetriedThenReported) {
  server_.script({ScriptedReply::malformed(), ScriptedReply::answer("ok")});
  CurlChatClient client(config());
  ASSERT_TRUE(client.complete(request()).ok());
  server_.script(
      {ScriptedReply::malformed(), ScriptedReply::malformed(), ScriptedReply::malformed()});
  ChatResult failed = client.complete(request());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error.kind, ChatErrorKind::malformed);
  EXPECT_NE(failed.error.message.find("not JSON"), std::string::npos) << failed.error.message;
}

TEST_F(CurlChatClientTest, ConnectionDroppedMidBodyIsRetried) {
  server_.script({ScriptedReply::dropped(), ScriptedReply::answer("whole")});
  CurlChatClient client(config());
  ChatResult result = client.complete(request());
  ASSERT_TRUE(result.ok()) << result.error.message;
  EXPECT_EQ(result.response->content, "whole");
  EXPECT_EQ(result.response->attempts, 2);
}

TEST_F(CurlChatClientTest, SlowReplyPastTheTimeoutIsATimeout) {
  server_.script({ScriptedReply::slow(1.5, "late"), ScriptedReply::slow(1.5, "late")});
  LlmConfig c = config();
  c.request_timeout_s = 0.3;
  c.max_retries = 1;
  CurlChatClient client(c);
  auto start = Clock::now();
  ChatResult result = client.complete(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.kind, ChatErrorKind::timeout);
  EXPECT_EQ(result.error.attempts, 2);
  EXPECT_LT(seconds_since(start), 1.4);  // each attempt cut at 0.3 s, not the server's 1.5 s
}

TEST_F(CurlChatClientTest, RefusedKeyIsNotRetriedAndSaysWhatToCheck) {
  server_.require_key("sk-right");
  CurlChatClient client(config());
  ChatResult result = client.complete(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.kind, ChatErrorKind::unauthorized);
  EXPECT_EQ(result.error.http_status, 401);
  EXPECT_EQ(server_.requests().size(), 1u);
  EXPECT_NE(result.error.message.find("KFORGE_LLM_API_KEY"), std::string::npos)
      << result.error.message;
  EXPECT_NE(result.error.message.find("Incorrect API key"), std::string::npos)
      << result.error.message;
  EXPECT_EQ(result.error.message.find("sk-test"), std::string::npos) << "the key leaked";
}

TEST_F(CurlChatClientTest, UnknownModelNamesTheModel) {
  server_.serve_models({"deepseek-reasoner"});
  CurlChatClient client(config());
  ChatResult result = client.complete(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.kind, ChatErrorKind::model_not_found);
  EXPECT_NE(result.error.message.find("'kforge-fake'"), std::string::npos) << result.error.message;
  EXPECT_NE(result.error.message.find("KFORGE_LLM_MODEL"), std::string::npos)
      << result.error.message;
}

TEST_F(CurlChatClientTest, RefusedConnectionIsANetworkError) {
  LlmConfig c = config();
  {
    FakeOpenAiServer gone;
    c.base_url = gone.base_url();
  }  // stopped: nothing listens on its port any more
  c.max_retries = 1;
  CurlChatClient client(c);
  ChatResult result = client.complete(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.kind, ChatErrorKind::network);
  EXPECT_EQ(result.error.attempts, 2);
}

TEST_F(CurlChatClientTest, CancellationAbortsARequestInFlight) {
  server_.script({ScriptedReply::slow(2.5, "too late")});
  std::atomic<bool> cancel{false};
  CurlChatClient client(config(), &cancel);
  auto start = Clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  ChatResult result = client.complete(request());
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error.kind, ChatErrorKind::cancelled);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST_F(CurlChatClientTest, ConcurrencyLimitBoundsRequestsInFlight) {
  std::atomic<int> in_flight{0}, peak{0};
  server_.set_responder([&](const nlohmann::json&) {
    int now = ++in_flight;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    --in_flight;
    return ScriptedReply::answer("ok");
  });
  LlmConfig c = config();
  c.max_concurrency = 2;
  CurlChatClient client(c);
  std::vector<std::future<ChatResult>> results;
  for (int i = 0; i < 5; ++i) {
    results.push_back(std::async(std::launch::async, [&] { return client.complete(request()); }));
  }
  for (auto& r : results) EXPECT_TRUE(r.get().ok());
  EXPECT_EQ(peak.load(), 2);
}

TEST(RetryAfterTest, ParsesSecondsAndHttpDates) {
  EXPECT_EQ(parse_retry_after("7", 0.0), 7.0);
  // RFC 9110's example date, 1994-11-06T08:49:37Z = 784111777 s after the epoch.
  auto seconds = parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111770.0);
  ASSERT_TRUE(seconds);
  EXPECT_DOUBLE_EQ(*seconds, 7.0);
  EXPECT_FALSE(parse_retry_after("", 0.0));
  EXPECT_FALSE(parse_retry_after("soon", 0.0));
}

}  // namespace
}  // namespace kforge::llm

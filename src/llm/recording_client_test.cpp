// Transcripts, cache, replay and the cost budget of RecordingChatClient, over a scripted client;
// and the price table that the cost comes from.
#include "llm/recording_client.h"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

// Answers from a queue; counts calls.
class ScriptedClient : public ChatClient {
 public:
  ChatResult complete(const ChatRequest&) override {
    ++calls;
    ChatResult result = replies.front();
    replies.pop_front();
    return result;
  }
  static ChatResult answer(std::string content, int64_t prompt_tokens, int64_t completion_tokens) {
    ChatResult r;
    r.response = ChatResponse{};
    r.response->content = std::move(content);
    r.response->reasoning = "thinking about " + r.response->content;
    r.response->usage = {prompt_tokens, completion_tokens, 0};
    r.response->latency_s = 0.5;
    return r;
  }
  std::deque<ChatResult> replies;
  int calls = 0;
};

ChatRequest request(const std::string& text) {
  ChatRequest r;
  r.model = "kforge-fake";
  r.messages = {{"system", "rules"}, {"user", text}};
  r.temperature = 0.6;
  r.purpose = "generate";
  return r;
}

class RecordingClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_rec_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // $1 per million prompt tokens, $2 per million completion tokens.
  PriceTable prices() { return PriceTable({{"kforge-fake", {1.0, 2.0}}}); }
  fs::path dir_;
  ScriptedClient live_;
};

TEST_F(RecordingClientTest, WritesATranscriptPerExchangeWithCostAndNoKey) {
  live_.replies = {ScriptedClient::answer("kernel A", 1000, 500)};
  RecordingChatClient client(&live_, prices(), {dir_ / "llm", "", 0.0});
  ChatResult result = client.complete(request("write A"));
  ASSERT_TRUE(result.ok());
  EXPECT_DOUBLE_EQ(result.response->cost_usd, (1000 * 1.0 + 500 * 2.0) * 1e-6);
  nlohmann::json entry = nlohmann::json::parse(read_file(dir_ / "llm" / "0000-generate.json"));
  EXPECT_EQ(entry["request"]["messages"][1]["content"], "write A");
  EXPECT_EQ(entry["response"]["content"], "kernel A");
  EXPECT_EQ(entry["response"]["reasoning"], "thinking about kernel A");
  EXPECT_EQ(entry["response"]["usage"]["completion_tokens"], 500);
  EXPECT_EQ(entry.dump().find("Authorization"), std::string::npos);
  EXPECT_EQ(client.usage().requests, 1);
  EXPECT_DOUBLE_EQ(client.usage().cost_usd, 0.002);
}

TEST_F(RecordingClientTest, IdenticalRequestIsAnsweredFromTheCache) {
  live_.replies = {ScriptedClient::answer("kernel A", 10, 10)};
  RecordingChatClient client(&live_, prices(), {dir_ / "llm", "", 0.0});
  ASSERT_TRUE(client.complete(request("same")).ok());
  ChatResult again = client.complete(request("same"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.response->from_cache);
  EXPECT_EQ(again.response->content, "kernel A");
  EXPECT_EQ(live_.calls, 1);
}

TEST_F(RecordingClientTest, ReplayAnswersWithoutTheNetworkAndAMissSaysSo) {
  live_.replies = {ScriptedClient::answer("kernel A", 1000, 500),
                   ScriptedClient::answer("kernel B", 1000, 500)};
  {
    RecordingChatClient recording(&live_, prices(), {dir_ / "run1" / "llm", "", 0.0});
    ASSERT_TRUE(recording.complete(request("a")).ok());
    ASSERT_TRUE(recording.complete(request("b")).ok());
  }
  RecordingChatClient replay(nullptr, prices(),
                             {dir_ / "run2" / "llm", dir_ / "run1" / "llm", 0.0});
  ChatResult b = replay.complete(request("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.response->content, "kernel B");
  EXPECT_TRUE(b.response->from_cache);
  EXPECT_DOUBLE_EQ(replay.usage().cost_usd, 0.002);  // a replay counts the recorded cost
  try {
    replay.complete(request("never asked"));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--replay: no recorded answer"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(live_.calls, 2);
}

TEST_F(RecordingClientTest, ReplayMatchesByLabelWhenTheNumbersInThePromptDiffer) {
  live_.replies = {ScriptedClient::answer("kernel for p1", 10, 10),
                   ScriptedClient::answer("p1 again", 10, 10)};
  {
    RecordingChatClient recording(&live_, prices(), {dir_ / "run1" / "llm", "", 0.0});
    ChatRequest first = request("parent runs 2.001 ms");
    first.label = "llm-vector_loads-abc123";
    ASSERT_TRUE(recording.complete(first).ok());
    first.messages[1].content = "parent runs 2.002 ms";
    ASSERT_TRUE(recording.complete(first).ok());
  }
  RecordingChatClient replay(nullptr, prices(),
                             {dir_ / "run2" / "llm", dir_ / "run1" / "llm", 0.0});
  ChatRequest asked = request("parent runs 1.987 ms");
  asked.label = "llm-vector_loads-abc123";
  EXPECT_EQ(replay.complete(asked).response->content, "kernel for p1");
  EXPECT_EQ(replay.complete(asked).response->content, "p1 again");  // in recorded order
  EXPECT_THROW(replay.complete(asked), Error);
  asked.label = "llm-other-def456";
  EXPECT_THROW(replay.complete(asked), Error);
}

TEST_F(RecordingClientTest, ReplayOfARunWithoutTranscriptsIsAnError) {
  EXPECT_THROW(RecordingChatClient(nullptr, prices(), {dir_ / "llm", dir_ / "nothing", 0.0}),
               Error);
}

TEST_F(RecordingClientTest, BudgetStopsRequestsOnceSpent) {
  // Each answer costs $0.002; a $0.003 budget allows two, refuses the third.
  live_.replies = {ScriptedClient::answer("1", 1000, 500), ScriptedClient::answer("2", 1000, 500),
                   ScriptedClient::answer("3", 1000, 500)};
  RecordingChatClient client(&live_, prices(), {dir_ / "llm", "", 0.003});
  EXPECT_TRUE(client.complete(request("1")).ok());
  EXPECT_FALSE(client.budget_exhausted());
  EXPECT_TRUE(client.complete(request("2")).ok());
  EXPECT_TRUE(client.budget_exhausted());
  ChatResult refused = client.complete(request("3"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error.kind, ChatErrorKind::budget_exhausted);
  EXPECT_EQ(live_.calls, 2);
}

TEST_F(RecordingClientTest, FailuresAreTranscribedToo) {
  ChatResult failed;
  failed.error = {ChatErrorKind::unauthorized, "refused the API key", 401, 1};
  live_.replies = {failed};
  RecordingChatClient client(&live_, prices(), {dir_ / "llm", "", 0.0});
  EXPECT_FALSE(client.complete(request("x")).ok());
  nlohmann::json entry = nlohmann::json::parse(read_file(dir_ / "llm" / "0000-generate.json"));
  EXPECT_EQ(entry["error"]["kind"], "unauthorized");
  EXPECT_EQ(client.usage().failures, 1);
}

TEST(PriceTableTest, ExactThenLongestPrefixThenNothing) {
  PriceTable table({{"gpt-4o", {2.5, 10.0}}, {"gpt-4o-mini", {0.15, 0.6}}});
  EXPECT_DOUBLE_EQ(table.price("gpt-4o-2024-08-06")->input_usd_per_mtok, 2.5);
  EXPECT_DOUBLE_EQ(table.price("gpt-4o-mini-2024-07-18")->input_usd_per_mtok, 0.15);
  EXPECT_FALSE(table.price("llama3"));
  EXPECT_DOUBLE_EQ(table.cost_usd("llama3", {1000000, 1000000, 0}), 0.0);
  EXPECT_DOUBLE_EQ(table.cost_usd("gpt-4o", {1000000, 500000, 0}), 7.5);
}

TEST(PriceTableTest, TheShippedTableLoadsAndBadEntriesNameTheKey) {
  PriceTable shipped =
      PriceTable::load((fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "llm_prices.toml").string());
  EXPECT_TRUE(shipped.price("deepseek-reasoner"));
  fs::path bad = fs::temp_directory_path() / "kforge_bad_prices.toml";
  write_file_atomically(bad, "[models.m]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 1\n");
  try {
    PriceTable::load(bad.string());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("models.m.input_usd_per_mtok"), std::string::npos)
        << e.what();
  }
  fs::remove(bad);
}

}  // namespace
}  // namespace kforge::llm

// The LLM strategy selector: a valid JSON answer picks the strategy; anything else falls back
// to UCB1 and is logged.
#include "llm/llm_selector.h"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>

#include "common/files.h"
#include "task/task_loader.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

class OneDirectionStore : public memory::Store {
 public:
  std::vector<memory::Direction> directions(const std::string&) override {
    memory::Direction d;
    d.id = "memory_access";
    d.title = "Memory access";
    d.goal = "move each byte once";
    return {d};
  }
  std::vector<memory::Strategy> strategies(const std::string&) override { return {}; }
  std::optional<memory::Edge> edge(const std::string&, const std::string&) override {
    return std::nullopt;
  }
  std::vector<memory::Edge> edges() override { return {}; }
  std::vector<memory::Evidence> evidence(const std::string&) override { return {}; }
  void record(const memory::Evidence&) override {}
  int64_t evidence_count() override { return 0; }
};

class QueueClient : public ChatClient {
 public:
  ChatResult complete(const ChatRequest& request) override {
    requests.push_back(request);
    ChatResult r = replies.front();
    replies.pop_front();
    return r;
  }
  void answer(const std::string& content) {
    ChatResult r;
    r.response = ChatResponse{};
    r.response->content = content;
    replies.push_back(r);
  }
  std::deque<ChatResult> replies;
  std::vector<ChatRequest> requests;
};

class LlmSelectorTest : public ::testing::Test {
 protected:
  LlmSelectorTest()
      : library_(fs::path(KFORGE_SOURCE_DIR) / "prompts"),
        task_(load_task(
            (fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string())),
        prompts_(library_, task_, "cpu", "/* abi */", "/* reference */"),
        selector_(
            client_, prompts_, "kforge-fake", 0.0, store_,
            [] {
              return SearchState{"- Best kernel so far: `seed`.", {"parallel_decomposition"}};
            },
            [this](const std::string& line, const nlohmann::json& event) {
              lines_.push_back(line);
              events_.push_back(event);
            }) {
    for (const char* id : {"vector_loads", "store_exp", "fuse_passes"}) {
      memory::Strategy s;
      s.id = id;
      s.direction_id = "memory_access";
      s.title = id;
      candidates_.push_back(s);
      arms_.push_back(memory::StrategyArm{s, {}, false});
    }
  }

  PromptLibrary library_;
  Task task_;
  PromptBuilder prompts_;
  QueueClient client_;
  OneDirectionStore store_;
  LlmStrategySelector selector_;
  std::vector<memory::Strategy> candidates_;
  std::vector<memory::StrategyArm> arms_;  // the same strategies, as the policy hands them over
  memory::StateSummary state_;
  std::vector<std::string> lines_;
  std::vector<nlohmann::json> events_;
  std::mt19937_64 rng_{7};
};

TEST_F(LlmSelectorTest, ValidAnswerPicksTheNamedStrategy) {
  client_.answer(
      "<think>fusing saves a pass</think>\n```json\n{\"strategy_id\": \"fuse_passes\", \"reason\": "
      "\"one pass less\"}\n```");
  memory::StrategyPick pick = selector_.select(arms_, state_, rng_);
  EXPECT_EQ(pick.index, 2u);
  EXPECT_NE(pick.explanation.find("one pass less"), std::string::npos);
  EXPECT_EQ(selector_.fallbacks(), 0);
  ASSERT_EQ(client_.requests.size(), 1u);
  EXPECT_EQ(client_.requests[0].purpose, "select");
  const std::string& prompt = client_.requests[0].messages.back().content;
  EXPECT_NE(prompt.find("one of: vector_loads, store_exp, fuse_passes"), std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("Best kernel so far"), std::string::npos) << prompt;
}

TEST_F(LlmSelectorTest, UnknownIdFallsBackToUcb1AndIsLogged) {
  client_.answer("{\"strategy_id\": \"tensor_cores\", \"reason\": \"fast\"}");
  memory::StrategyPick pick = selector_.select(arms_, state_, rng_);
  EXPECT_LT(pick.index, candidates_.size());
  EXPECT_EQ(selector_.fallbacks(), 1);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0]["event"], "llm_selector_fallback");
  EXPECT_NE(lines_[0].find("tensor_cores"), std::string::npos) << lines_[0];
}

TEST_F(LlmSelectorTest, ProseAndErrorsFallBack) {
  client_.answer("I would pick the vector loads strategy.");
  ChatResult failed;
  failed.error = {ChatErrorKind::budget_exhausted, "LLM budget reached", 0, 0};
  client_.replies.push_back(failed);
  selector_.select(arms_, state_, rng_);
  selector_.select(arms_, state_, rng_);
  EXPECT_EQ(selector_.fallbacks(), 2);
  EXPECT_NE(lines_[0].find("not a JSON object"), std::string::npos) << lines_[0];
  EXPECT_NE(lines_[1].find("budget_exhausted"), std::string::npos) << lines_[1];
}

TEST_F(LlmSelectorTest, ASingleCandidateIsTakenWithoutAsking) {
  std::vector<memory::StrategyArm> one = {arms_[0]};
  EXPECT_EQ(selector_.select(one, state_, rng_).index, 0u);
  EXPECT_TRUE(client_.requests.empty());
}

TEST(SelectorAnswerTest, ParsesBareFencedAndEmbeddedJson) {
  std::vector<memory::Strategy> c(2);
  c[0].id = "a";
  c[1].id = "b";
  EXPECT_EQ(*parse_selector_answer("{\"strategy_id\":\"b\",\"reason\":\"r\"}", c).index, 1u);
  EXPECT_EQ(
      *parse_selector_answer("I choose:\n{\"strategy_id\": \"a\", \"reason\": \"{x}\"}\nDone.", c)
           .index,
      0u);
  EXPECT_EQ(parse_selector_answer("{\"strategy\": \"a\"}", c).error,
            "the answer has no string \"strategy_id\"");
  EXPECT_FALSE(parse_selector_answer("{\"strategy_id\": 1}", c).index);
}

}  // namespace
}  // namespace kforge::llm

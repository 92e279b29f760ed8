// The llm generator over a scripted chat client: cheap planning, prompts that carry the
// strategy and the last feedback, rule-based repair of the reply, failures as values, the
// repair conversation, and the stop reason.
#include "generation/llm_generator.h"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <mutex>

#include "task/task_loader.h"

namespace kforge::generation {
namespace {
namespace fs = std::filesystem;

// Answers in order; thread-safe (write_sources asks concurrently).
class QueueClient : public llm::ChatClient {
 public:
  llm::ChatResult complete(const llm::ChatRequest& request) override {
    std::lock_guard lock(mutex);
    requests.push_back(request);
    llm::ChatResult r = replies.front();
    replies.pop_front();
    return r;
  }
  void answer(const std::string& content) {
    llm::ChatResult r;
    r.response = llm::ChatResponse{};
    r.response->content = content;
    replies.push_back(r);
  }
  std::mutex mutex;
  std::deque<llm::ChatResult> replies;
  std::vector<llm::ChatRequest> requests;
};

class StoreWithOneDirection : public memory::Store {
 public:
  std::vector<memory::Direction> directions(const std::string&) override {
    memory::Direction d;
    d.id = "vectorization";
    d.title = "Vectorization";
    d.goal = "use the vector units";
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

const char kKernelWithoutIncludes[] =
    "Here you go:\n```cpp\nint kforge_run(const kforge_args* a) {\n"
    "  float* y = static_cast<float*>(a->outputs[0].data);\n  y[0] = std::sqrt(4.0f);\n  return "
    "0;\n}\n```\n";

class LlmGeneratorTest : public ::testing::Test {
 protected:
  LlmGeneratorTest()
      : library_(fs::path(KFORGE_SOURCE_DIR) / "prompts"),
        task_(load_task(
            (fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string())),
        prompts_(library_, task_, "cpu", "/* abi */", "/* reference */"),
        generator_(
            client_, prompts_, store_, task_, {"cpu", "kforge-fake", 0.5, std::nullopt},
            [this] { return stop_; },
            [this](const std::string&, const nlohmann::json& event) { events_.push_back(event); }) {
    strategy_.id = "cpu_simd";
    strategy_.direction_id = "vectorization";
    strategy_.title = "SIMD the inner loop";
    strategy_.edit_pattern = "omp simd on the row loops";
  }

  Proposal seed() { return generator_.initial_proposals().at(0); }

  llm::PromptLibrary library_;
  Task task_;
  llm::PromptBuilder prompts_;
  QueueClient client_;
  StoreWithOneDirection store_;
  LlmGenerator generator_;
  memory::Strategy strategy_;
  std::string stop_;
  std::vector<nlohmann::json> events_;
};

TEST_F(LlmGeneratorTest, StartsFromTheReferenceAndPlansWithoutAsking) {
  Proposal start = seed();
  EXPECT_EQ(start.id, "reference-seed");
  EXPECT_NE(start.job.source.find("kforge_run"), std::string::npos);
  std::optional<Proposal> planned = generator_.apply(start, strategy_);
  ASSERT_TRUE(planned);
  EXPECT_TRUE(planned->job.source.empty());
  EXPECT_EQ(planned->id, generator_.apply(start, strategy_)->id);  // deterministic
  EXPECT_EQ(planned->id.rfind("llm-cpu_simd-", 0), 0u) << planned->id;
  EXPECT_TRUE(client_.requests.empty());
}

TEST_F(LlmGeneratorTest, WritesTheRepairedKernelFromAPromptWithStrategyAndFeedback) {
  Proposal start = seed();
  Feedback timed;
  timed.median_ms = 2.0;
  timed.reference_ms = 2.0;
  timed.is_best = true;
  generator_.observe(start, timed);
  Proposal planned = *generator_.apply(start, strategy_);
  client_.answer(kKernelWithoutIncludes);
  generator_.write_sources({&planned});
  ASSERT_TRUE(planned.failure.empty()) << planned.failure;
  EXPECT_NE(planned.job.source.find("#include <kforge/kernel.h>"), std::string::npos)
      << planned.job.source;
  EXPECT_NE(planned.job.source.find("#include <cmath>"), std::string::npos) << planned.job.source;
  EXPECT_NE(planned.job.source.find("KFORGE_API int kforge_run"), std::string::npos);
  EXPECT_NE(planned.change.find("added missing includes"), std::string::npos) << planned.change;
  ASSERT_EQ(client_.requests.size(), 1u);
  const std::string& prompt = client_.requests[0].messages.back().content;
  EXPECT_NE(prompt.find("Strategy to apply: SIMD the inner loop"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("Median 2.0000 ms"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("Candidate `reference-seed`: ok."), std::string::npos) << prompt;
  EXPECT_EQ(client_.requests[0].label, planned.id);
  EXPECT_EQ(generator_.search_state().prefix, std::vector<std::string>{"vectorization"});
}

TEST_F(LlmGeneratorTest, RepliesWithoutCodeAndErrorsAreFailuresNotExceptions) {
  Proposal start = seed();
  Proposal a = *generator_.apply(start, strategy_);
  memory::Strategy other = strategy_;
  other.id = "cpu_unroll";
  Proposal b = *generator_.apply(start, other);
  client_.answer("I would leave the kernel as it is.");
  generator_.write_sources({&a});
  llm::ChatResult refused;
  refused.error = {llm::ChatErrorKind::unauthorized, "http://x refused the API key (HTTP 401)", 401,
                   1};
  client_.replies.push_back(refused);
  generator_.write_sources({&b});
  EXPECT_NE(a.failure.find("no C++ code block"), std::string::npos) << a.failure;
  EXPECT_NE(b.failure.find("refused the API key"), std::string::npos) << b.failure;
}

TEST_F(LlmGeneratorTest, RepairContinuesTheConversationWithTheCompilerErrors) {
  Proposal start = seed();
  Proposal planned = *generator_.apply(start, strategy_);
  client_.answer(kKernelWithoutIncludes);
  generator_.write_sources({&planned});
  Feedback broken;
  broken.verdict = Verdict::compile_error;
  broken.build_log = "/tmp/x/cand.cpp:3:5: error: 'sum' was not declared in this scope\n";
  generator_.observe(planned, broken);
  client_.answer(
      "```cpp\n#include <kforge/kernel.h>\nKFORGE_API int kforge_run(const kforge_args* a) { "
      "return 0; }\n```");
  std::optional<Proposal> fixed = generator_.repair(planned, broken);
  ASSERT_TRUE(fixed);
  EXPECT_TRUE(fixed->failure.empty()) << fixed->failure;
  EXPECT_EQ(fixed->id, planned.id + "-r1");
  const llm::ChatRequest& request = client_.requests.back();
  EXPECT_EQ(request.purpose, "repair");
  ASSERT_EQ(request.messages.size(), 4u);  // system, generate, the model's answer, the errors
  EXPECT_EQ(request.messages[2].role, "assistant");
  EXPECT_NE(request.messages[3].content.find("cand.cpp:3:5: error: 'sum' was not declared"),
            std::string::npos)
      << request.messages[3].content;
  // A second repair of the repair is numbered from the same root.
  client_.answer("no code this time");
  EXPECT_EQ(generator_.repair(*fixed, broken)->id, planned.id + "-r2");
}

TEST_F(LlmGeneratorTest, AStopReasonFailsProposalsWithoutAsking) {
  Proposal planned = *generator_.apply(seed(), strategy_);
  stop_ = "LLM budget reached";
  generator_.write_sources({&planned});
  EXPECT_EQ(planned.failure, "LLM budget reached");
  EXPECT_EQ(generator_.exhausted(), "LLM budget reached");
  EXPECT_TRUE(client_.requests.empty());
}

TEST_F(LlmGeneratorTest, WithoutANativeReferenceTheModelWritesTheFirstKernelAndRepairsIt) {
  task_.reference_paths.erase("cpu");  // as for a PyTorch problem: no native kernel to start from
  std::vector<Proposal> first = generator_.initial_proposals();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, LlmGenerator::kFirstKernelId);
  EXPECT_TRUE(first[0].job.source.empty());
  EXPECT_TRUE(first[0].parent_id.empty());
  EXPECT_TRUE(client_.requests.empty());  // planned, not yet asked
  client_.answer(kKernelWithoutIncludes);
  generator_.write_sources({&first[0]});
  ASSERT_TRUE(first[0].failure.empty()) << first[0].failure;
  EXPECT_NE(first[0].job.source.find("KFORGE_API int kforge_run"), std::string::npos);
  ASSERT_EQ(client_.requests.size(), 1u);
  const llm::ChatRequest& asked = client_.requests[0];
  EXPECT_EQ(asked.purpose, "first");
  EXPECT_EQ(asked.label, "llm-first");
  EXPECT_NE(asked.messages.back().content.find("Write the first native C++20"), std::string::npos)
      << asked.messages.back().content;
  EXPECT_EQ(asked.messages.back().content.find("Strategy to apply"), std::string::npos);
  EXPECT_TRUE(generator_.search_state().prefix.empty());  // no direction chosen for it
  // Its failure goes back to the model in the same conversation.
  Feedback wrong;
  wrong.verdict = Verdict::wrong_answer;
  wrong.message = "output 'y' at [0, 3]: got 0, expected 0.25";
  generator_.observe(first[0], wrong);
  client_.answer(kKernelWithoutIncludes);
  std::optional<Proposal> fixed = generator_.repair(first[0], wrong);
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->id, "llm-first-r1");
  EXPECT_EQ(client_.requests.back().messages.size(), 4u);
  EXPECT_NE(client_.requests.back().messages[3].content.find("expected 0.25"), std::string::npos);
}

TEST_F(LlmGeneratorTest, CandidatesItDidNotWriteAreNotRepaired) {
  Feedback failed;
  failed.verdict = Verdict::wrong_answer;
  EXPECT_FALSE(generator_.repair(seed(), failed));
}

}  // namespace
}  // namespace kforge::generation

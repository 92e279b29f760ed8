// End-to-end tests of `kforge optimize --generator llm` on the cpu backend, against the
// loopback fake OpenAI-compatible server: real compiler, real workers, real libcurl. The
// scripted model first writes a kernel that does not compile, repairs it into a correct and
// faster one when shown the errors, then answers without code; the run must end with that
// kernel verified faster, its exchanges recorded (never the key), and replay without a server
// (and refuse to go past what was recorded).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "common/files.h"
#include "process/subprocess.h"
#include "support/fake_openai_server.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using testing::corpus_reply;
using testing::FakeOpenAiServer;
using testing::ScriptedReply;

const char kKey[] = "sk-e2e-secret-key";

// The scripted model: selects the first candidate strategy; the first generation does not
// compile, its repair is the fast kernel; every later generation has no code.
// Copies share their state (the server calls a copy of its responder).
class ScriptedModel {
 public:
  ScriptedReply operator()(const nlohmann::json& request) {
    const std::string last = request["messages"].back()["content"];
    if (last.find("Candidate strategies under this direction") != std::string::npos) {
      std::smatch match;
      std::regex first_id("one of: ([A-Za-z0-9_]+)");
      std::string id = std::regex_search(last, match, first_id) ? match[1].str() : "unknown";
      return ScriptedReply::answer("{\"strategy_id\": \"" + id + "\", \"reason\": \"scripted\"}");
    }
    if (last.rfind("The kernel you wrote", 0) == 0) {
      return ScriptedReply::answer(corpus_reply("softmax_fast_cpu.md"),
                                   "the error says sum is undeclared");
    }
    if ((*generations_)++ == 0)
      return ScriptedReply::answer(corpus_reply("softmax_broken_cpu.md"), "plan");
    return ScriptedReply::answer(corpus_reply("no_code.md"));
  }

 private:
  std::shared_ptr<int> generations_ = std::make_shared<int>(0);
};

class CliLlmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_llm_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `launcher` (a command line that ends with kforge and its arguments) in the test's
  // environment.
  process::CommandResult kforge_with_launcher(std::vector<std::string> launcher,
                                              std::vector<std::string> env) {
    std::vector<std::string> argv = {"env", "KFORGE_MEMORY_DB=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "XDG_CONFIG_HOME=" + (dir_ / "config").string()};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), launcher.begin(), launcher.end());
    return process::run_command(argv, 600);
  }
  process::CommandResult kforge(std::vector<std::string> args, std::vector<std::string> env,
                                const std::string& memory = "memory.sqlite") {
    std::vector<std::string> argv = {"env",
                                     "KFORGE_MEMORY_DB=" + (dir_ / memory).string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "XDG_CONFIG_HOME=" + (dir_ / "config").string(),
                                     "KFORGE_LLM_BASE_URL=",
                                     "KFORGE_LLM_MODEL=",
                                     "KFORGE_LLM_API_KEY="};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }
  std::vector<std::string> endpoint(const FakeOpenAiServer& server, const std::string& key = kKey) {
    return {"KFORGE_LLM_BASE_URL=" + server.base_url(), "KFORGE_LLM_MODEL=kforge-fake",
            "KFORGE_LLM_API_KEY=" + key};
  }
  std::vector<std::string> optimize_args(const fs::path& run, int steps = 2) {
    return {"optimize",
            (fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string(),
            "--backend",
            "cpu",
            "--generator",
            "llm",
            "--run-dir",
            run.string(),
            "--steps",
            std::to_string(steps),
            "--proposals",
            "1",
            "--final-rounds",
            "3"};
  }
  static std::string all_text_under(const fs::path& dir) {
    std::string text;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file()) text += read_file(entry.path());
    }
    return text;
  }

  fs::path dir_;
};

TEST_F(CliLlmTest, LlmGeneratorEndsWithAVerifiedFasterKernelAndReplaysOffline) {
  FakeOpenAiServer server;
  server.require_key(kKey);
  server.set_responder(ScriptedModel());
  fs::path run = dir_ / "run";
  process::CommandResult result = kforge(optimize_args(run), endpoint(server));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (std::getenv("KFORGE_TEST_VERBOSE")) std::fprintf(stderr, "%s\n", result.output.c_str());

  nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  ASSERT_FALSE(json["best"].is_null()) << json.dump(2);
  const std::string best = json["best"]["id"];
  EXPECT_EQ(best.rfind("llm-", 0), 0u) << best;
  EXPECT_NE(best.find("-r1"), std::string::npos) << "the repaired kernel should win: " << best;
  EXPECT_GT(json["final"]["speedup"]["ci_low"].get<double>(), 1.2) << json["final"].dump(2);
  EXPECT_EQ(json["generator"], "llm");
  EXPECT_GE(json["generation_failures"].get<int>(), 1);  // the reply without code
  EXPECT_GT(json["llm"]["cost_usd"].get<double>(), 0.0);
  bool saw_compile_error = false;
  for (const auto& c : json["candidates"]) saw_compile_error |= c["verdict"] == "compile_error";
  EXPECT_TRUE(saw_compile_error);
  EXPECT_NE(read_file(run / "best.cpp").find("fast_exp"), std::string::npos);
  std::string events = read_file(run / "events.jsonl");
  EXPECT_NE(events.find("no C++ code block"), std::string::npos) << events;
  EXPECT_NE(events.find("\"llm_selector\""), std::string::npos) << events;
  // Every exchange is in the run directory; the key is nowhere in it.
  EXPECT_TRUE(fs::exists(run / "llm" / "0000-select.json") ||
              fs::exists(run / "llm" / "0000-generate.json"));
  EXPECT_EQ(all_text_under(run).find(kKey), std::string::npos) << "the API key leaked into the run";
  EXPECT_NE(result.output.find("llm: "), std::string::npos) << result.output;

  // Replay: no endpoint at all, the same decisions from the recorded answers (from the same
  // memory the first run started with: a fresh one).
  size_t requests = server.requests().size();
  fs::path replay = dir_ / "replay";
  std::vector<std::string> args = optimize_args(replay);
  args.insert(args.end(), {"--replay", run.string()});
  process::CommandResult replayed = kforge(args, {}, "replay-memory.sqlite");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.output;
  nlohmann::json again = nlohmann::json::parse(read_file(replay / "result.json"));
  EXPECT_EQ(again["best"]["id"], best);
  EXPECT_EQ(again["candidates"].size(), json["candidates"].size());
  EXPECT_EQ(server.requests().size(), requests);

  // A replay that asks what the recorded run never asked (one step more) ends with an error.
  fs::path longer = dir_ / "longer";
  args = optimize_args(longer, 3);
  args.insert(args.end(), {"--replay", run.string()});
  process::CommandResult diverged = kforge(args, {}, "longer-memory.sqlite");
  EXPECT_EQ(diverged.exit_code, 1) << diverged.output;
  EXPECT_NE(diverged.output.find("kforge: error: --replay: no recorded answer"), std::string::npos)
      << diverged.output;
  EXPECT_TRUE(fs::exists(longer / "failed.txt"));
  EXPECT_FALSE(fs::exists(longer / "result.json"));
  EXPECT_EQ(server.requests().size(), requests);
}

TEST_F(CliLlmTest, NoEndpointSaysWhichVariablesToSetAndWritesNoRun) {
  fs::path run = dir_ / "run";
  process::CommandResult result = kforge(optimize_args(run), {});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("KFORGE_LLM_BASE_URL"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("KFORGE_LLM_MODEL"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("--generator templates"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(run));
}

TEST_F(CliLlmTest, RefusedKeyFailsEachStepAndTheRunStillFinishes) {
  FakeOpenAiServer server;
  server.require_key("sk-the-right-one");
  fs::path run = dir_ / "run";
  process::CommandResult result = kforge(optimize_args(run), endpoint(server, "sk-wrong"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("refused the API key"), std::string::npos) << result.output;
  nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_EQ(json["generation_failures"], 2);  // one per step
  EXPECT_EQ(json["best"]["id"], "reference-seed");
  EXPECT_GE(json["llm"]["failures"].get<int>(), 2);
}

TEST_F(CliLlmTest, BudgetStopsTheSearchAndTheRunStillFinishes) {
  FakeOpenAiServer server;
  server.set_responder(ScriptedModel());
  fs::path run = dir_ / "run";
  // Each scripted answer costs $0.002 at kforge-fake's price (knowledge/llm_prices.toml): the
  // selection and the first kernel spend $0.004, past the $0.003 budget, so its repair is
  // never asked for.
  std::vector<std::string> args = optimize_args(run, 4);
  args.insert(args.end(), {"--llm-budget-usd", "0.003"});
  process::CommandResult result = kforge(args, endpoint(server));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(server.requests().size(), 2u);
  nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_NE(json["stopped_early"].get<std::string>().find("LLM budget reached"), std::string::npos)
      << json["stopped_early"];
  EXPECT_DOUBLE_EQ(json["llm"]["cost_usd"].get<double>(), 0.004);
  EXPECT_EQ(json["best"]["id"], "reference-seed");
  EXPECT_NE(result.output.find("stopping the search: LLM budget reached"), std::string::npos)
      << result.output;
}

// Waits 20 s for its Ctrl-C: `slow` (scripts/test-slow).
class SlowCliLlmTest : public CliLlmTest {};

TEST_F(SlowCliLlmTest, CtrlCCancelsTheRequestInFlightAndTheRunEndsWithItsBest) {
  FakeOpenAiServer server;
  auto release = std::make_shared<std::atomic<bool>>(false);
  // Selections are answered; generations hang (up to a minute) until the test ends.
  server.set_responder([release](const nlohmann::json& request) {
    const std::string last = request["messages"].back()["content"];
    if (last.find("Candidate strategies") != std::string::npos) {
      return ScriptedReply::answer("{\"strategy_id\": \"none\"}");
    }
    for (int i = 0; i < 1200 && !release->load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ScriptedReply::answer("too late");
  });
  fs::path run = dir_ / "run";
  // --foreground: one SIGINT to kforge only. Without it, timeout signals the child and then its
  // whole process group, and a second Ctrl-C means "skip the final timing".
  std::vector<std::string> args = {"timeout", "--foreground", "--preserve-status",
                                   "--signal=INT", "20", KFORGE_CLI_PATH};
  std::vector<std::string> optimize = optimize_args(run);
  args.insert(args.end(), optimize.begin(), optimize.end());
  process::CommandResult result = kforge_with_launcher(args, endpoint(server));
  release->store(true);
  EXPECT_EQ(result.exit_code, 130) << result.output;
  EXPECT_NE(result.output.find("stopping the search: interrupted (Ctrl-C)"), std::string::npos)
      << result.output;
  ASSERT_TRUE(fs::exists(run / "result.json")) << result.output;
  nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_EQ(json["stopped_early"], "interrupted (Ctrl-C)");
  EXPECT_EQ(json["best"]["id"], "reference-seed");
}

}  // namespace
}  // namespace kforge

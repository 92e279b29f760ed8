// End-to-end tests of `kforge optimize --generator llm` on a PyTorch problem file that no
// built-in family computes (python/tests/problems/linear_relu_half.py: y = relu(x W^T + b) / 2
// with nn.Linear), on the cpu backend: the torch reference worker runs the module, the loopback
// fake OpenAI server plays the model, candidates are compiled and run for real. The model is
// shown the module's source and the mapping of the signature onto it, writes the first kernel
// (after one repair), and the run ends with it verified; a model that never writes a correct
// kernel ends the run with exit code 3 and a summary that says so. With the templates generator
// such a problem is refused, and in a suite it is a row saying to use --generator llm.
// Every test skips when the test Python cannot import torch (Debian's python3-torch).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/test_python.h"
#include "common/files.h"
#include "process/subprocess.h"
#include "support/fake_openai_server.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using testing::corpus_reply;
using testing::FakeOpenAiServer;
using testing::ScriptedReply;

const char kProblem[] = "python/tests/problems/linear_relu_half.py";

// The scripted model. First kernel: `first` (then each repair answers `repair`); the selector
// takes the first strategy offered; a step's generation answers `generate`. Copies share their
// record of the prompts they were shown (the server calls a copy of its responder).
class ScriptedModel {
 public:
  ScriptedModel(std::string first, std::string repair, std::string generate)
      : first_(std::move(first)), repair_(std::move(repair)), generate_(std::move(generate)) {}

  ScriptedReply operator()(const nlohmann::json& request) {
    const std::string last = request["messages"].back()["content"];
    if (last.find("Candidate strategies under this direction") != std::string::npos) {
      std::smatch match;
      std::regex first_id("one of: ([A-Za-z0-9_]+)");
      std::string id = std::regex_search(last, match, first_id) ? match[1].str() : "unknown";
      return ScriptedReply::answer("{\"strategy_id\": \"" + id + "\", \"reason\": \"scripted\"}");
    }
    if (last.rfind("The kernel you wrote", 0) == 0) {
      // Only the first kernel's conversation is repaired into a correct kernel; a later
      // candidate's repair answers without code, so no copy of the first kernel competes with it
      // (an identical kernel can win an acceptance comparison by chance on a loaded machine).
      const bool first_kernel =
          request["messages"].dump().find("Write the first native") != std::string::npos;
      return ScriptedReply::answer(corpus_reply(first_kernel ? repair_ : "no_code.md"));
    }
    if (last.find("Write the first native") != std::string::npos) {
      prompts_->first.push_back(last);
      return ScriptedReply::answer(corpus_reply(first_), "read the module");
    }
    prompts_->generate.push_back(last);
    return ScriptedReply::answer(corpus_reply(generate_));
  }

  struct Prompts {
    std::vector<std::string> first, generate;
  };
  const Prompts& prompts() const { return *prompts_; }

 private:
  std::string first_, repair_, generate_;
  std::shared_ptr<Prompts> prompts_ = std::make_shared<Prompts>();
};

class CliLlmTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The derivation and the reference worker need a Python with torch (Debian's
    // python3-torch; scripts/setup installs it).
    process::CommandResult probe =
        process::run_command({kforge::testing::test_python(), "-c", "import torch, numpy"}, 120);
    if (probe.exit_code != 0) {
      GTEST_SKIP() << kforge::testing::test_python() << " cannot import torch: " << probe.output;
    }
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_llm_torch_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  process::CommandResult kforge(std::vector<std::string> args, std::vector<std::string> env,
                                const std::string& memory = "memory.sqlite") {
    std::vector<std::string> argv = {"env",
                                     "KFORGE_MEMORY=" + (dir_ / memory).string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "XDG_CONFIG_HOME=" + (dir_ / "config").string(),
                                     "KFORGE_PYTHON=" + kforge::testing::test_python(),
                                     "KFORGE_LLM_BASE_URL=",
                                     "KFORGE_LLM_MODEL=",
                                     "KFORGE_LLM_API_KEY="};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 600);
  }
  static std::vector<std::string> endpoint(const FakeOpenAiServer& server) {
    return {"KFORGE_LLM_BASE_URL=" + server.base_url(), "KFORGE_LLM_MODEL=kforge-fake",
            "KFORGE_LLM_API_KEY=sk-test"};
  }
  static std::vector<std::string> optimize_args(const fs::path& run) {
    return {"optimize",    (fs::path(KFORGE_SOURCE_DIR) / kProblem).string(),
            "--backend",   "cpu",
            "--generator", "llm",
            // Native kernels behind kforge_run (a problem's default is a ModelNew: --language
            // cuda, tests/cli_llm_model_new_test.cpp).
            "--language",  "native",
            "--run-dir",   run.string(),
            "--steps",     "1",
            "--proposals", "1",
            "--final-rounds", "3"};
  }

  static int events(const fs::path& run, const std::string& kind) {
    std::ifstream in(run / "events.jsonl");
    int count = 0;
    for (std::string line; std::getline(in, line);) {
      count += line.find("\"event\":\"" + kind + "\"") != std::string::npos;
    }
    return count;
  }

  fs::path dir_;
};

TEST_F(CliLlmTorchTest, TheModelWritesTheFirstKernelFromTheModuleAndTheRunVerifiesIt) {
  FakeOpenAiServer server;
  // The first kernel does not compile; its repair is correct; step 1's kernel forgets the bias
  // (a wrong answer) and its repair has no code, so the first kernel stays the best.
  ScriptedModel model("linear_relu_broken_cpu.md", "linear_relu_first_cpu.md",
                      "linear_relu_no_bias_cpu.md");
  server.set_responder(model);
  const fs::path run = dir_ / "run";
  process::CommandResult result = kforge(optimize_args(run), endpoint(server));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("step 0: the first kernel, written by the generator"),
            std::string::npos)
      << result.output;

  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  ASSERT_FALSE(json["best"].is_null()) << json.dump(2);
  EXPECT_EQ(json["best"]["id"], "llm-first-r1");
  ASSERT_GE(json["candidates"].size(), 3u) << json.dump(2);
  const nlohmann::json& first = json["candidates"][0];
  EXPECT_EQ(first["id"], "llm-first");
  EXPECT_EQ(first["verdict"], "compile_error");
  EXPECT_EQ(first["step"], 0);
  EXPECT_EQ(json["candidates"][1]["id"], "llm-first-r1");
  EXPECT_EQ(json["candidates"][1]["verdict"], "ok");
  EXPECT_EQ(json["candidates"][1]["strategy"], "");  // no HTAM move made the first kernel
  // Step 1 refines the model's first kernel: it is the parent.
  const nlohmann::json& refined = json["candidates"][2];
  EXPECT_EQ(refined["step"], 1);
  EXPECT_EQ(refined["parent"], "llm-first-r1") << refined.dump(2);
  EXPECT_NE(refined["strategy"], "");
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 0.0);
  EXPECT_NE(read_file(run / "best.cpp").find("acc += bs[o];"), std::string::npos);
  EXPECT_GT(json["llm"]["cost_usd"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(run / "llm" / "0000-first.json"));
  EXPECT_TRUE(fs::exists(run / "reference.torch.json"));

  // What the model was shown: the module's source in a python fence, where each kforge_run
  // argument lives in the module, and where its values come from.
  ASSERT_EQ(model.prompts().first.size(), 1u);
  const std::string& prompt = model.prompts().first[0];
  for (const std::string& expected :
       {std::string("```python\n\"\"\"A test problem no built-in family computes"),
        std::string("self.linear = nn.Linear(in_features, out_features)"),
        std::string("## The signature in the module"),
        std::string("`args->inputs[0]` = `x`: f32 [batch_size, in_features]; argument 0 of "
                    "`forward`"),
        std::string("`args->inputs[1]` = `linear_weight`: f32 [out_features, in_features]; the "
                    "module's parameter `linear.weight`"),
        std::string("`args->outputs[0]` = `out`: f32 [batch_size, out_features]; what `forward` "
                    "returns"),
        std::string("values made by kforge's generator"),
        std::string("read them and never assume their values"),
        std::string("include/kforge/kernel.h")}) {
    EXPECT_NE(prompt.find(expected), std::string::npos) << "missing: " << expected << "\n"
                                                        << prompt;
  }
  ASSERT_EQ(model.prompts().generate.size(), 1u);
  EXPECT_NE(model.prompts().generate[0].find("## Current kernel `llm-first-r1`"),
            std::string::npos);
  EXPECT_NE(model.prompts().generate[0].find("## The signature in the module"), std::string::npos);

  // Replay: no endpoint, the same candidates and best from the recorded answers.
  const size_t requests = server.requests().size();
  const fs::path replay = dir_ / "replay";
  std::vector<std::string> args = optimize_args(replay);
  args.insert(args.end(), {"--replay", run.string()});
  process::CommandResult replayed = kforge(args, {}, "replay-memory.sqlite");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.output;
  const nlohmann::json again = nlohmann::json::parse(read_file(replay / "result.json"));
  EXPECT_EQ(again["best"]["id"], "llm-first-r1");
  EXPECT_EQ(again["candidates"].size(), json["candidates"].size());
  EXPECT_EQ(server.requests().size(), requests);
}

TEST_F(CliLlmTorchTest, AKilledRunResumesWithTheFirstKernelFromTheRunDatabaseAndTheCache) {
  FakeOpenAiServer server;
  ScriptedModel model("linear_relu_broken_cpu.md", "linear_relu_first_cpu.md",
                      "linear_relu_no_bias_cpu.md");
  server.set_responder(model);
  const fs::path run = dir_ / "run";
  process::SpawnOptions spawn;
  spawn.argv = {KFORGE_CLI_PATH};
  for (const std::string& arg : optimize_args(run)) spawn.argv.push_back(arg);
  std::vector<std::string> environment = {
      "KFORGE_MEMORY=" + (dir_ / "memory.sqlite").string(),
      "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
      "XDG_CONFIG_HOME=" + (dir_ / "config").string(),
      "KFORGE_PYTHON=" + kforge::testing::test_python()};
  for (const std::string& entry : endpoint(server)) environment.push_back(entry);
  for (const char* name : {"PATH", "HOME", "TMPDIR"}) {
    if (const char* value = std::getenv(name)) environment.push_back(std::string(name) + "=" + value);
  }
  spawn.environment = environment;
  spawn.pipe_stdin = false;
  spawn.merge_stderr = true;
  {
    // Killed (SIGKILL: no handler runs) once the first kernel and its repair are recorded.
    process::Subprocess optimize(spawn);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (events(run, "candidate") < 2 && std::chrono::steady_clock::now() < deadline &&
           !optimize.poll_exit()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(events(run, "candidate"), 2) << "the run ended or stalled before its 2nd candidate";
    optimize.kill();
  }
  ASSERT_FALSE(fs::exists(run / "result.json"));

  process::CommandResult resumed = kforge({"optimize", "--resume", run.string()}, endpoint(server));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_EQ(json["best"]["id"], "llm-first-r1") << json.dump(2);
  EXPECT_GE(json["replayed_candidates"].get<int>(), 2);
  EXPECT_EQ(json["candidates"][0]["id"], "llm-first");
  EXPECT_EQ(json["candidates"][1]["id"], "llm-first-r1");
  // The first kernel and its repair came back from the answer cache, not from the model.
  EXPECT_EQ(model.prompts().first.size(), 1u);
  EXPECT_EQ(events(run, "run_resumed"), 1);
}

TEST_F(CliLlmTorchTest, AModelThatNeverWritesACorrectKernelEndsTheRunWithExitCode3) {
  FakeOpenAiServer server;
  // Every kernel forgets the bias: wrong answers, first and after each repair. The repair
  // answers the same kernel, which is recorded as a duplicate of the first and ends the
  // repairs (the same failure would get the same answer again; issue 21).
  server.set_responder(ScriptedModel("linear_relu_no_bias_cpu.md", "linear_relu_no_bias_cpu.md",
                                     "linear_relu_no_bias_cpu.md"));
  const fs::path run = dir_ / "run";
  std::vector<std::string> args = optimize_args(run);
  args.insert(args.end(), {"--repair-tries", "2"});
  process::CommandResult result = kforge(args, endpoint(server));
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("no correct candidate (2 wrong_answer)"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("stopped:    no first kernel the generator wrote passed the gate"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(run / "best.cpp"));
  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_TRUE(json["best"].is_null());
  ASSERT_EQ(json["candidates"].size(), 2u) << json.dump(2);
  EXPECT_EQ(json["candidates"][1]["id"], "llm-first-r1");
  EXPECT_EQ(json["candidates"][1]["duplicate_of"], "llm-first");
  EXPECT_EQ(json["candidates"][1]["device_s"], 0.0);
  EXPECT_NE(result.output.find("same as #0 (not evaluated again)"), std::string::npos);
  EXPECT_EQ(json["budget"]["stopped_by"], "no_correct");
  EXPECT_NE(read_file(run / "report.md").find("Stopped: no first kernel"), std::string::npos);
}

TEST_F(CliLlmTorchTest, ProvidedInputsReachTheModelsKernelThroughTheWholeRun) {
  // masked_pick's bool mask and class ids come from its get_inputs() (provided inputs): the
  // model is told so, its kernel reads them in every rung, and the run verifies it.
  FakeOpenAiServer server;
  ScriptedModel model("masked_pick_cpu.md", "no_code.md", "no_code.md");
  server.set_responder(model);
  const fs::path run = dir_ / "run";
  std::vector<std::string> args = optimize_args(run);
  args[1] = (fs::path(KFORGE_SOURCE_DIR) / "python/tests/problems/masked_pick.py").string();
  process::CommandResult result = kforge(args, endpoint(server));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  ASSERT_FALSE(json["best"].is_null()) << json.dump(2);
  EXPECT_EQ(json["best"]["id"], "llm-first");
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 0.0);
  ASSERT_EQ(model.prompts().first.size(), 1u);
  const std::string& prompt = model.prompts().first[0];
  EXPECT_NE(prompt.find("`args->inputs[1]` = `mask`: bool"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("the problem's own get_inputs()"), std::string::npos) << prompt;
  // The derived task the run keeps marks them.
  EXPECT_NE(read_file(run / "task.toml").find("provided = true"), std::string::npos);
}

TEST_F(CliLlmTorchTest, WithTheTemplatesGeneratorTheProblemIsARowThatSaysToUseTheLlm) {
  const fs::path problems = dir_ / "problems";
  fs::create_directories(problems);
  fs::copy_file(fs::path(KFORGE_SOURCE_DIR) / kProblem, problems / "linear_relu_half.py");
  const fs::path suite = dir_ / "suite";
  process::CommandResult result =
      kforge({"suite", problems.string(), "--suite-dir", suite.string(), "--backend", "cpu",
              "--steps", "1"},
             {});
  // Not correct (3), not an error (1): the templates generator has nothing to run for it.
  EXPECT_EQ(result.exit_code, 3) << result.output;
  const nlohmann::json json = nlohmann::json::parse(read_file(suite / "suite.json"));
  ASSERT_EQ(json["tasks"].size(), 1u) << json.dump(2);
  EXPECT_EQ(json["tasks"][0]["status"], "not served") << json.dump(2);
  const std::string failure = json["tasks"][0].value("failure", "");
  EXPECT_NE(failure.find("no built-in kernel family computes what this module computes"),
            std::string::npos)
      << failure;
  EXPECT_NE(failure.find("--generator llm writes a kernel for it"), std::string::npos) << failure;
}

}  // namespace
}  // namespace kforge

// End-to-end tests of `kforge optimize --generator llm --language cuda` on a PyTorch problem
// (python/tests/problems/linear_relu_half.py) on the cpu backend, where a ModelNew's load_inline
// sources are C++: the loopback fake OpenAI server plays the model, the Python candidate worker
// builds and runs each ModelNew for real. The model's first ModelNew has another constructor (a
// wrong_signature verdict before any build), its first repair does not compile (load_inline's
// errors go back to it), its second is correct and becomes the run's best, written as best.py
// and solution.py. The Slow* fixture builds extensions (tens of seconds each): ctest label slow.
// Every test skips when the test Python cannot import torch.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

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

// The scripted model: the first request gets `first`, the n-th repair `repairs[n-1]`; it keeps
// every message it was sent.
class ScriptedModelNew {
 public:
  ScriptedModelNew(std::string first, std::vector<std::string> repairs)
      : first_(std::move(first)), repairs_(std::move(repairs)) {}

  ScriptedReply operator()(const nlohmann::json& request) {
    const std::string last = request["messages"].back()["content"];
    if (last.rfind("The kernel you wrote", 0) == 0) {
      seen_->repairs.push_back(last);
      const size_t n = seen_->repairs.size() - 1;
      return ScriptedReply::answer(corpus_reply(n < repairs_.size() ? repairs_[n] : "no_code.md"));
    }
    seen_->system.push_back(request["messages"].front()["content"]);
    seen_->first.push_back(last);
    return ScriptedReply::answer(corpus_reply(first_));
  }

  struct Seen {
    std::vector<std::string> system, first, repairs;
  };
  const Seen& seen() const { return *seen_; }

 private:
  std::string first_;
  std::vector<std::string> repairs_;
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
};

class CliLlmModelNewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    process::CommandResult probe =
        process::run_command({kforge::testing::test_python(), "-c", "import torch, numpy"}, 120);
    if (probe.exit_code != 0) {
      GTEST_SKIP() << kforge::testing::test_python() << " cannot import torch: " << probe.output;
    }
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_llm_model_new_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  process::CommandResult kforge(std::vector<std::string> args, std::vector<std::string> env) {
    std::vector<std::string> argv = {"env",
                                     "KFORGE_MEMORY=" + (dir_ / "memory.sqlite").string(),
                                     "KFORGE_CACHE_DIR=" + (dir_ / "cache").string(),
                                     "XDG_CONFIG_HOME=" + (dir_ / "config").string(),
                                     "KFORGE_PYTHON=" + kforge::testing::test_python(),
                                     "KFORGE_LLM_BASE_URL=",
                                     "KFORGE_LLM_MODEL=",
                                     "KFORGE_LLM_API_KEY="};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(KFORGE_CLI_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 1200);
  }
  static std::vector<std::string> endpoint(const FakeOpenAiServer& server) {
    return {"KFORGE_LLM_BASE_URL=" + server.base_url(), "KFORGE_LLM_MODEL=kforge-fake",
            "KFORGE_LLM_API_KEY=sk-test"};
  }
  static std::string problem() { return (fs::path(KFORGE_SOURCE_DIR) / kProblem).string(); }

  fs::path dir_;
};

TEST_F(CliLlmModelNewTest, ALanguageThatCannotRunIsRefusedBeforeTheRunStarts) {
  FakeOpenAiServer server;
  process::CommandResult triton =
      kforge({"optimize", problem(), "--backend", "cpu", "--generator", "llm", "--language",
              "triton", "--run-dir", (dir_ / "triton").string()},
             endpoint(server));
  EXPECT_EQ(triton.exit_code, 1) << triton.output;
  EXPECT_NE(triton.output.find("--language triton: Triton kernels run on NVIDIA GPUs only"),
            std::string::npos)
      << triton.output;
  const std::string toml = (fs::path(KFORGE_SOURCE_DIR) / "examples/softmax/task.toml").string();
  process::CommandResult native_task =
      kforge({"optimize", toml, "--backend", "cpu", "--generator", "llm", "--language", "cuda",
              "--run-dir", (dir_ / "toml").string()},
             endpoint(server));
  EXPECT_EQ(native_task.exit_code, 1) << native_task.output;
  EXPECT_NE(native_task.output.find("has no PyTorch reference; use --language native"),
            std::string::npos)
      << native_task.output;
  process::CommandResult unknown = kforge({"optimize", toml, "--language", "opencl"}, {});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(server.requests().empty());
  EXPECT_FALSE(fs::exists(dir_ / "triton"));
  EXPECT_FALSE(fs::exists(dir_ / "toml"));
}

using SlowCliLlmModelNewTest = CliLlmModelNewTest;

TEST_F(SlowCliLlmModelNewTest, TheModelsModelNewIsRepairedBuiltByLoadInlineAndBecomesTheBest) {
  FakeOpenAiServer server;
  ScriptedModelNew model("model_new_wrong_constructor_cpu.md",
                         {"model_new_compile_error_cpu.md", "model_new_linear_relu_cpu.md"});
  server.set_responder(model);
  const fs::path run = dir_ / "run";
  // --language left out: cuda is the default for a PyTorch problem with --generator llm.
  process::CommandResult result =
      kforge({"optimize", problem(), "--backend", "cpu", "--generator", "llm", "--run-dir",
              run.string(), "--steps", "0", "--final-rounds", "3", "--repair-tries", "2"},
             endpoint(server));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const nlohmann::json json = nlohmann::json::parse(read_file(run / "result.json"));
  EXPECT_EQ(json["language"], "cuda");
  EXPECT_EQ(nlohmann::json::parse(read_file(run / "run.json"))["language"], "cuda");
  ASSERT_FALSE(json["best"].is_null()) << json.dump(2);
  EXPECT_EQ(json["best"]["id"], "llm-first-r2");
  ASSERT_EQ(json["candidates"].size(), 3u) << json.dump(2);
  EXPECT_EQ(json["candidates"][0]["id"], "llm-first");
  EXPECT_EQ(json["candidates"][0]["verdict"], "wrong_signature");
  EXPECT_EQ(json["candidates"][1]["id"], "llm-first-r1");
  EXPECT_EQ(json["candidates"][1]["verdict"], "compile_error");
  EXPECT_EQ(json["candidates"][2]["verdict"], "ok");
  EXPECT_GT(json["final"]["speedup"]["speedup"].get<double>(), 0.0);

  // The first prompt asked for a ModelNew built by load_inline with C++ sources.
  ASSERT_EQ(model.seen().first.size(), 1u);
  EXPECT_NE(model.seen().first[0].find("Write the first `ModelNew`"), std::string::npos);
  EXPECT_NE(model.seen().system[0].find("without `cuda_sources`"), std::string::npos);
  // Each failure went back to the model: the constructors side by side, then g++'s error.
  ASSERT_EQ(model.seen().repairs.size(), 2u);
  EXPECT_NE(model.seen().repairs[0].find("ModelNew.__init__(self, features) differs from "
                                         "Model.__init__(self, in_features, out_features)"),
            std::string::npos)
      << model.seen().repairs[0];
  // (g++ quotes the name with the locale's quotation marks.)
  EXPECT_NE(model.seen().repairs[1].find("undeclared_accumulator"), std::string::npos)
      << model.seen().repairs[1];
  EXPECT_NE(model.seen().repairs[1].find("error: "), std::string::npos)
      << model.seen().repairs[1];
  EXPECT_NE(model.seen().repairs[1].find("was not declared in this scope"), std::string::npos)
      << model.seen().repairs[1];
  EXPECT_LT(model.seen().repairs[1].size(), 6000u);  // trimmed, not the whole ninja log

  // The best is the module itself, and so is the KernelBench solution.
  const std::string best = read_file(run / "best.py");
  EXPECT_NE(best.find("class ModelNew(nn.Module):"), std::string::npos);
  EXPECT_NE(best.find("kforge_test_linear_relu_half_ok"), std::string::npos);
  EXPECT_FALSE(fs::exists(run / "best.cpp"));
  EXPECT_EQ(read_file(run / "solution.py"), best);
  EXPECT_TRUE(fs::exists(run / "candidates" / "000-llm_first" / "source.py"));
}

}  // namespace
}  // namespace kforge

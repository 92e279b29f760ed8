// Golden tests of the rendered prompts (tests/llm_prompts/*.md), and the renderer's rules.
// After a deliberate change to prompts/ or the builder, regenerate the goldens with
//   KFORGE_UPDATE_GOLDEN=1 build/release/tests/kforge_tests --gtest_filter='PromptGolden*'
// and review the diff.
#include "llm/prompt_builder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "task/task_loader.h"
#include "support/backends.h"
#include "task/torch_task.h"

namespace kforge::llm {
namespace {
namespace fs = std::filesystem;

fs::path source_dir() { return fs::path(KFORGE_SOURCE_DIR); }

void expect_golden(const std::string& name, const std::string& actual) {
  fs::path golden = source_dir() / "tests" / "llm_prompts" / name;
  if (std::getenv("KFORGE_UPDATE_GOLDEN") != nullptr) {
    fs::create_directories(golden.parent_path());
    write_file_atomically(golden, actual);
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " missing; run with KFORGE_UPDATE_GOLDEN=1";
  EXPECT_EQ(read_file(golden), actual) << "rendered prompt differs from " << golden;
}

std::string render(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) out += "=== " + m.role + "\n" + m.content + "\n";
  return out;
}

class PromptGoldenTest : public ::testing::Test {
 protected:
  PromptGoldenTest()
      : library_(source_dir() / "prompts"),
        task_(load_task((source_dir() / "tests/data/softmax_small/task.toml").string())),
        builder_(library_, task_, "cpu", read_file(source_dir() / "include/kforge/kernel.h"),
                 read_file(task_.reference_paths.at("cpu"))) {
    context_.direction.id = "memory_access";
    context_.direction.title = "Memory access";
    context_.direction.goal = "Move each byte once, in wide contiguous accesses.";
    context_.direction.triggers = {"achieved bandwidth well below the copy bandwidth"};
    context_.direction.risks = {"misaligned vector accesses", "tails of odd sizes"};
    context_.direction.stats.attempts = 4;
    context_.direction.stats.successes = 1;
    context_.direction.stats.ok_attempts = 3;
    context_.direction.stats.mean_log_gain = 0.1;
    context_.strategy.id = "cpu_simd_exp";
    context_.strategy.direction_id = "memory_access";
    context_.strategy.title = "Vectorizable exponential";
    context_.strategy.edit_pattern =
        "Replace libm exp by a branch-free polynomial in an omp simd loop.";
    context_.strategy.validation = {"max relative error below 1e-6 on [-87, 88]"};
    context_.prefix = {"parallel_decomposition"};
    memory::Edge edge;
    edge.from_direction = "parallel_decomposition";
    edge.to_direction = "memory_access";
    edge.rationale = "once every core works, memory traffic dominates";
    context_.edge = edge;
    parent_.id = "reference-seed";
    parent_.source =
        "// the parent kernel\nKFORGE_API int kforge_run(const kforge_args* a) { return 0; }";
    parent_.median_ms = 2.0;
    parent_.reference_ms = 2.0;
    parent_.bytes_moved = 2 * 256 * 1024 * 4;
    parent_.flops = 5.0 * 256 * 1024;
  }

  PromptLibrary library_;
  Task task_;
  PromptBuilder builder_;
  StrategyContext context_;
  KernelState parent_;
};

TEST_F(PromptGoldenTest, GenerateAtTheFirstStep) {
  expect_golden("generate_first_step.md",
                render(builder_.generate(parent_, context_, std::nullopt, diagnose(parent_))));
}

TEST_F(PromptGoldenTest, GenerateAfterACompileError) {
  FeedbackContext last;
  last.candidate_id = "llm-cpu_unroll-1a2b3c";
  last.verdict = Verdict::compile_error;
  last.build_log =
      "/tmp/kforge/build/17/llm-cpu_unroll-1a2b3c.cpp: In function 'int kforge_run(const "
      "kforge_args*)':\n"
      "/tmp/kforge/build/17/llm-cpu_unroll-1a2b3c.cpp:12:7: error: 'sum' was not declared in this "
      "scope\n"
      "   12 |       sum += e;\n"
      "      |       ^~~\n";
  expect_golden("generate_after_compile_error.md",
                render(builder_.generate(parent_, context_, last, "")));
}

TEST_F(PromptGoldenTest, RepairAfterAWrongAnswer) {
  FeedbackContext failure;
  failure.candidate_id = "llm-cpu_simd_exp-9f8e7d";
  failure.verdict = Verdict::wrong_answer;
  failure.message =
      "workload 'tail' seed 1 (normal): output 'y' at [3, 1030]: got 0.5, expected 0.25 (max abs "
      "error 0.25)";
  expect_golden("repair_wrong_answer.md", "=== user\n" + builder_.repair(failure).content + "\n");
}

TEST_F(PromptGoldenTest, SelectAmongStrategies) {
  memory::Strategy other = context_.strategy;
  other.id = "cpu_store_exp";
  other.title = "Store the exponentials";
  other.edit_pattern = "Write exp(x - m) into y during the sum pass, then scale y.";
  other.stats.attempts = 2;
  other.stats.ok_attempts = 2;
  other.stats.successes = 2;
  other.stats.mean_log_gain = 0.2;
  std::vector<memory::Strategy> candidates = {context_.strategy, other};
  expect_golden("select.md", render(builder_.select("- Best kernel so far: `reference-seed`.",
                                                    context_, candidates)));
}

// A PyTorch problem no built-in family computes (python/tests/problems/linear_relu_half.py), as
// kforge derives it: tests/data/linear_relu_half/derived.json is the output of
//   kforge task python/tests/problems/linear_relu_half.py --json
// without family_misses and notes, its `problem` made relative.
class TorchPromptGoldenTest : public ::testing::Test {
 protected:
  TorchPromptGoldenTest()
      : library_(source_dir() / "prompts"),
        task_(task_from_derived(
            nlohmann::json::parse(read_file(source_dir() / "tests/data/linear_relu_half/derived.json")),
            "linear_relu_half.py")),
        builder_(library_, task_, "cpu", read_file(source_dir() / "include/kforge/kernel.h"),
                 read_file(source_dir() / "python/tests/problems/linear_relu_half.py")) {}

  PromptLibrary library_;
  Task task_;
  PromptBuilder builder_;
};

TEST_F(TorchPromptGoldenTest, FirstKernelShowsTheModuleAndTheMapping) {
  expect_golden("first_torch.md", render(builder_.first()));
}

TEST_F(TorchPromptGoldenTest, GenerateRefinesTheModelsKernelAgainstTheModule) {
  KernelState parent;
  parent.id = "llm-first-r1";
  parent.source = "// the model's first kernel\nKFORGE_API int kforge_run(const kforge_args* a) { return 0; }";
  parent.median_ms = 0.05;
  parent.reference_ms = 0.08;
  parent.bytes_moved = 4 * (48 * 192 + 80 * 192 + 80 + 48 * 80);
  StrategyContext context;
  context.direction.id = "parallel_decomposition";
  context.direction.title = "Parallel decomposition";
  context.direction.goal = "Give every core independent work.";
  context.strategy.id = "cpu_block_rows";
  context.strategy.direction_id = "parallel_decomposition";
  context.strategy.title = "Block the rows";
  context.strategy.edit_pattern = "Each thread takes a block of rows and reuses each weight row.";
  expect_golden("generate_torch.md",
                render(builder_.generate(parent, context, std::nullopt, diagnose(parent))));
}

// ModelNew prompts (--language cuda|triton): the module's source, the constructor to keep, the
// parameters ModelNew must create, the screen's refusals, how the kernels are built per backend.
class ModelNewPromptGoldenTest : public TorchPromptGoldenTest {
 protected:
  PromptBuilder builder(const std::string& backend, KernelLanguage language) const {
    return PromptBuilder(library_, task_, backend, "", problem_, language);
  }
  const std::string problem_ =
      read_file(source_dir() / "python/tests/problems/linear_relu_half.py");
};

TEST_F(ModelNewPromptGoldenTest, FirstModelNewOnCpuAsksForLoadInlineWithCppSources) {
  const std::vector<ChatMessage> messages = builder("cpu", KernelLanguage::cuda).first();
  expect_golden("first_model_new_cpu.md", render(messages));
  const std::string user = messages.at(1).content;
  EXPECT_NE(user.find("- Constructor: `def __init__(self, in_features, out_features)`"),
            std::string::npos);
  EXPECT_NE(user.find("- parameter `linear.weight`: f32 [80, 192] at the timed workload"),
            std::string::npos)
      << user;
  EXPECT_EQ(user.find("kforge_run"), std::string::npos) << user;
}

TEST_F(ModelNewPromptGoldenTest, GenerateAndRepairOnCudaAskForAPythonBlock) {
  if (!::kforge::testing::has_backend("cuda")) GTEST_SKIP() << "no cuda backend in this build";
  const PromptBuilder cuda = builder("cuda", KernelLanguage::cuda);
  KernelState parent;
  parent.id = "llm-first-r1";
  parent.source = "# kforge candidate llm-first-r1\nclass ModelNew(nn.Module):\n    pass\n";
  parent.median_ms = 0.05;
  parent.reference_ms = 0.08;
  parent.bytes_moved = 4 * (48 * 192 + 80 * 192 + 80 + 48 * 80);
  StrategyContext context;
  context.direction.id = "memory_access";
  context.direction.title = "Memory access";
  context.direction.goal = "Move each byte once, in wide contiguous accesses.";
  context.strategy.id = "cuda_vectorized_loads";
  context.strategy.direction_id = "memory_access";
  context.strategy.title = "16-byte vectorized loads";
  context.strategy.edit_pattern = "Load float4 where the row is aligned; a scalar tail.";
  FeedbackContext compile_error;
  compile_error.candidate_id = "llm-first";
  compile_error.verdict = Verdict::compile_error;
  compile_error.build_log = "staged for the Python candidate worker";
  compile_error.message =
      "the candidate raised while loading: RuntimeError: Error building extension 'x': [1/2] "
      "c++ -MMD -c /tmp/torch_extensions/x/main.cpp -o main.o\nFAILED: main.o\n"
      "/tmp/torch_extensions/x/main.cpp:7:52: error: 'undeclared_accumulator' was not declared "
      "in this scope\n    7 |   ys[i] = undeclared_accumulator;\n      |           ^~~~\n"
      "ninja: build stopped: subcommand failed.";
  expect_golden("generate_model_new_cuda.md",
                render(cuda.generate(parent, context, compile_error, diagnose(parent))) +
                    "=== user (repair)\n" + cuda.repair(compile_error).content + "\n");
}

TEST_F(ModelNewPromptGoldenTest, TritonSaysHowItsKernelsAreLaunched) {
  if (!::kforge::testing::has_backend("cuda")) GTEST_SKIP() << "no cuda backend in this build";
  const std::vector<ChatMessage> messages = builder("cuda", KernelLanguage::triton).first();
  expect_golden("first_model_new_triton.md", render(messages));
  EXPECT_NE(messages.at(0).content.find("@triton.jit"), std::string::npos);
}

TEST(PromptTemplateTest, PlaceholdersSectionsAndComments) {
  PromptValues values = {{"name", "softmax"}, {"empty", ""}, {"full", "x"}};
  EXPECT_EQ(render_template("{{! note }}\nop {{ name }}.", values, "t"), "op softmax.");
  EXPECT_EQ(render_template("a{{#empty}}hidden {{name}}{{/empty}}b", values, "t"), "ab");
  EXPECT_EQ(render_template("a{{#full}}[{{name}}]{{/full}}b", values, "t"), "a[softmax]b");
  // Values are inserted verbatim, never re-scanned.
  EXPECT_EQ(render_template("{{v}}", {{"v", "{{name}}"}}, "t"), "{{name}}");
}

TEST(PromptTemplateTest, MistakesNameTheTemplateAndLine) {
  auto message = [](const std::string& text) {
    try {
      render_template(text, {{"a", "1"}}, "prompts/x.md");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("line\n{{b}}"), "prompts/x.md:2: {{b}}: no value given for 'b'");
  EXPECT_EQ(message("{{#a}} never closed"), "prompts/x.md:1: {{#a}} is never closed by {{/a}}");
  EXPECT_EQ(message("{{a"), "prompts/x.md:1: unclosed '{{'");
  EXPECT_EQ(message("{{/a}}"), "prompts/x.md:1: {{/a}} without a matching {{#a}}");
}

TEST(PromptBuilderTest, CompileErrorSummaryKeepsErrorsAndShortensPaths) {
  std::string log;
  for (int i = 0; i < 12; ++i) {
    log += "/very/long/dir/cand.cpp:" + std::to_string(i + 1) + ":3: error: problem " +
           std::to_string(i) + "\n  context\n";
  }
  std::string summary = summarize_compile_errors(log, 3);
  EXPECT_NE(summary.find("cand.cpp:1:3: error: problem 0"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("/very/long"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("problem 5"), std::string::npos) << summary;
  EXPECT_NE(summary.find("and 9 more error lines"), std::string::npos) << summary;
}

}  // namespace
}  // namespace kforge::llm

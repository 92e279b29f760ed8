// The parser/repair step for ModelNew replies (model_new_reply.h), on inline replies and on the
// corpus replies the end-to-end test plays (tests/llm_replies/model_new_*.md).
#include "llm/model_new_reply.h"

#include <gtest/gtest.h>

#include "common/files.h"
#include "evaluation/model_new_check.h"
#include "support/fake_openai_server.h"

namespace kforge::llm {
namespace {

const char kProblem[] = "class Model(nn.Module):\n    def __init__(self, in_features, "
                        "out_features):\n        super().__init__()\n";

TEST(ModelNewReplyTest, TheLastPythonBlockDefiningModelNewWins) {
  const std::string reply =
      "<think>```python\nclass ModelNew(nn.Module):\n    DRAFT = 1\n```</think>\n"
      "First a CUDA kernel on its own:\n```cuda\n__global__ void k() {}\n```\n"
      "A helper:\n```python\ndef helper():\n    return 1\n```\n"
      "The module:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    FIRST = 1\n```\n"
      "Refined:\n```py\nimport torch\nclass ModelNew(torch.nn.Module):\n    FINAL = 1\n```\n";
  std::optional<ExtractedCode> code = extract_model_new(reply);
  ASSERT_TRUE(code);
  EXPECT_NE(code->source.find("FINAL"), std::string::npos) << code->source;
  EXPECT_EQ(code->blocks_found, 3);  // python blocks outside the reasoning
  EXPECT_FALSE(code->truncated);
}

TEST(ModelNewReplyTest, AReplyWithoutModelNewGivesItsLargestPythonBlockOrNothing) {
  std::optional<ExtractedCode> code = extract_model_new(
      "```python\nx = 1\n```\nand\n```python\nclass Fast(nn.Module):\n    pass\n```\n");
  ASSERT_TRUE(code);
  EXPECT_FALSE(defines_model_new(code->source));
  EXPECT_NE(code->source.find("class Fast"), std::string::npos);
  // The static check then names what is missing: that message goes back to the model.
  EXPECT_NE(evaluation::check_model_new_signature(code->source, kProblem)
                .find("the candidate defines no ModelNew"),
            std::string::npos);
  EXPECT_FALSE(extract_model_new("I cannot help with that."));
  EXPECT_FALSE(extract_model_new("```cpp\nint main() {}\n```\n"));
}

TEST(ModelNewReplyTest, AnUnfencedModuleIsTakenFromItsFirstImport) {
  std::optional<ExtractedCode> code = extract_model_new(
      "Sure.\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n");
  ASSERT_TRUE(code);
  EXPECT_FALSE(code->from_fence);
  EXPECT_EQ(code->source.rfind("import torch", 0), 0u) << code->source;
}

TEST(ModelNewReplyTest, ACutOffBlockIsMarkedTruncated) {
  std::optional<ExtractedCode> code =
      extract_model_new("```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n");
  ASSERT_TRUE(code);
  EXPECT_TRUE(code->truncated);
}

TEST(ModelNewReplyTest, MissingImportsAreAddedForNamesTheModuleUses) {
  const std::string source =
      "from __future__ import annotations\n"
      "\"\"\"Uses torch. and tl. in a docstring only.\"\"\"\n"
      "_ext = load_inline(name='x', cpp_sources='', functions=[])\n"
      "class ModelNew(nn.Module):\n"
      "    def forward(self, x):\n"
      "        return F.relu(x) + torch.ones(1)\n";
  RepairResult repaired = repair_model_new(source);
  EXPECT_EQ(repaired.source.rfind("from __future__ import annotations\nimport torch\n"
                                  "import torch.nn as nn\nimport torch.nn.functional as F\n"
                                  "from torch.utils.cpp_extension import load_inline\n",
                                  0),
            0u)
      << repaired.source;
  EXPECT_EQ(repaired.source.find("import triton"), std::string::npos) << repaired.source;
  ASSERT_EQ(repaired.fixes.size(), 1u);
  EXPECT_NE(repaired.fixes[0].find("added missing imports"), std::string::npos);

  const std::string complete =
      "import torch\nfrom torch import nn\nimport triton\nimport triton.language as tl\n"
      "@triton.jit\ndef k(p):\n    tl.store(p, 1)\nclass ModelNew(nn.Module):\n    pass\n";
  EXPECT_TRUE(repair_model_new(complete).fixes.empty());
  EXPECT_EQ(repair_model_new(complete).source, complete);
  RepairResult triton = repair_model_new("@triton.jit\ndef k(p):\n    tl.store(p, 1)\n");
  EXPECT_EQ(triton.source.rfind("import triton\nimport triton.language as tl\n", 0), 0u)
      << triton.source;
}

TEST(ModelNewReplyTest, AMainBlockIsRemoved) {
  RepairResult repaired = repair_model_new(
      "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n\nif __name__ == \"__main__\":\n"
      "    m = Model(3)\n\n    print(m)\n# trailing comment stays with the block\nX = 1\n");
  EXPECT_EQ(repaired.source.find("Model(3)"), std::string::npos) << repaired.source;
  EXPECT_NE(repaired.source.find("X = 1"), std::string::npos) << repaired.source;
  ASSERT_EQ(repaired.fixes.size(), 1u);
  EXPECT_NE(repaired.fixes[0].find("__main__"), std::string::npos);
}

TEST(ModelNewReplyTest, TheCorpusRepliesOfTheEndToEndTest) {
  const std::string problem =
      read_file(std::string(KFORGE_SOURCE_DIR) + "/python/tests/problems/linear_relu_half.py");
  struct Case {
    const char* file;
    bool signature_ok;
  };
  for (const Case& c : {Case{"model_new_linear_relu_cpu.md", true},
                        Case{"model_new_wrong_constructor_cpu.md", false},
                        Case{"model_new_compile_error_cpu.md", true}}) {
    SCOPED_TRACE(c.file);
    std::optional<ExtractedCode> code = extract_model_new(testing::corpus_reply(c.file));
    ASSERT_TRUE(code);
    RepairResult repaired = repair_model_new(code->source);
    EXPECT_TRUE(defines_model_new(repaired.source));
    EXPECT_EQ(evaluation::check_model_new_signature(repaired.source, problem).empty(),
              c.signature_ok);
    EXPECT_EQ(repaired.source.find("Model(192"), std::string::npos);  // the __main__ block
  }
}

}  // namespace
}  // namespace kforge::llm

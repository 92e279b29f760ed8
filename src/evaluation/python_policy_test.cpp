#include "evaluation/python_policy.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "worker/test_kernels.h"

namespace kforge::evaluation {
namespace {

std::string corpus_dir() { return worker::testing::source_root() + "/tests/adversarial/torch"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string screen(const std::string& source, const std::string& family = "softmax",
                   const std::string& problem_source = "") {
  // Screened as the corpus task is (tests/adversarial/torch/problem.py, no family) unless a
  // test names a family.
  const PythonScreen task{forbidden_torch_ops(family, problem_source), "problem"};
  return format_violations(check_python_source(SourcePolicy{}, source, task, "cpu"),
                           "candidate.py");
}

// Every corpus file (tests/adversarial/torch/manifest.toml) screened as the corpus task is (its
// problem calls torch.softmax after a linear layer, no family): the entries whose verdict is
// rejected_by_policy are rejected for their static_reason, and every other passes, so the
// dynamic checks judge it.
TEST(PythonPolicyTest, CorpusEntriesGetTheirStaticVerdicts) {
  const toml::table root = toml::parse_file(corpus_dir() + "/manifest.toml");
  const toml::array* candidates = root["candidate"].as_array();
  ASSERT_NE(candidates, nullptr);
  int rejected = 0;
  for (const toml::node& node : *candidates) {
    const toml::table& entry = *node.as_table();
    const std::string file = entry["file"].value_or(std::string());
    SCOPED_TRACE(file);
    const std::string found =
        screen(read_file(corpus_dir() + "/" + file), "", read_file(corpus_dir() + "/problem.py"));
    if (entry["expect"].value_or(std::string()) == "rejected_by_policy") {
      ++rejected;
      EXPECT_NE(found.find("[" + entry["static_reason"].value_or(std::string("?")) + "]"),
                std::string::npos)
          << found;
    } else {
      EXPECT_EQ(found, "");
    }
  }
  EXPECT_GE(rejected, 6);
}

TEST(PythonPolicyTest, NamesTheLineAndTheRule) {
  const std::string found = screen("import torch\n\nimport threading\n");
  EXPECT_EQ(found.rfind("candidate.py:3:8: [thread_creation] starts a thread", 0), 0u) << found;
}

TEST(PythonPolicyTest, CommentsAndStringsDoNotCountButInlineSourcesDo) {
  EXPECT_EQ(screen("# import threading\nx = 'torch.softmax(y)'\n"), "");
  // A load_inline source that makes its own stream is screened with the native rules.
  const PythonScreen task{{}, ""};
  const std::string inline_source =
      "src = '''\n__global__ void k() {}\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); }\n'''\n";
  const std::string found =
      format_violations(check_python_source(SourcePolicy{}, inline_source, task, "cpu"), "c.py");
  EXPECT_NE(found.find("c.py:3:"), std::string::npos) << found;
  EXPECT_NE(found.find("[stream_creation] inline source:"), std::string::npos) << found;
}

TEST(PythonPolicyTest, ForbiddenOpsFollowTheFamilyAndTheProblem) {
  EXPECT_NE(screen("y = F.softmax(x, dim=1)\n").find("[library_compute]"), std::string::npos);
  EXPECT_NE(screen("from torch.nn.functional import softmax\n").find("[library_compute]"),
            std::string::npos);
  EXPECT_NE(screen("m = nn.Softmax(dim=1)\n").find("[library_compute]"), std::string::npos);
  // Another family's operator, and ops for the rest of a fused problem, stay allowed.
  EXPECT_EQ(screen("y = torch.softmax(x, 1)\nz = x @ w\n", "rmsnorm"), "");
  EXPECT_NE(screen("z = x @ w\n", "gemv").find("[library_compute]"), std::string::npos);
  EXPECT_EQ(screen("@triton.jit\ndef k(x):\n    pass\n", "gemv"), "");
  // Attention: forbidden wherever the problem itself calls it.
  const std::string problem = "return F.scaled_dot_product_attention(q, k, v)";
  EXPECT_NE(screen("y = F.scaled_dot_product_attention(q, k, v)\n", "", problem)
                .find("'scaled_dot_product_attention'"),
            std::string::npos);
  EXPECT_EQ(screen("y = F.scaled_dot_product_attention(q, k, v)\n", "", ""), "");
  // ... and wherever the task is served by the attention family, whatever the problem says.
  EXPECT_NE(screen("y = F.scaled_dot_product_attention(q, k, v)\n", "attention", "")
                .find("[library_compute]"),
            std::string::npos);
  // A fused problem: its softmax is forbidden, its linear layer is not.
  const std::string fused = "return torch.softmax(self.linear(x), dim=1)";
  EXPECT_NE(screen("y = x.softmax(1)\n", "", fused).find("[library_compute]"), std::string::npos);
  EXPECT_EQ(screen("z = torch.addmm(b, x, w.t())\n", "", fused), "");
  // A name inside a longer one is not a mention.
  EXPECT_EQ(forbidden_torch_ops("", "my_softmaxish(x)"), std::vector<std::string>{});
}

TEST(PythonPolicyTest, TamperingAndTheReferenceAreCaught) {
  EXPECT_NE(screen("time.perf_counter = lambda: 0.0\n").find("[harness_tampering]"),
            std::string::npos);
  EXPECT_NE(screen("torch.cuda.synchronize = f\n").find("[harness_tampering]"),
            std::string::npos);
  EXPECT_EQ(screen("if torch.cuda.synchronize == f:\n    pass\n"), "");
  EXPECT_NE(screen("setattr(time, 'perf_counter', f)\n").find("[harness_tampering]"),
            std::string::npos);
  EXPECT_NE(screen("import kforge_torch\n").find("[harness_tampering]"), std::string::npos);
  EXPECT_NE(screen("m = Model(3)\n").find("[reference_call]"), std::string::npos);
  EXPECT_NE(screen("from problem import get_inputs\n").find("[reference_call]"),
            std::string::npos);
  EXPECT_EQ(screen("class Model(nn.Module):\n    pass\nm = ModelNew(3)\n"), "");
  EXPECT_NE(screen("f = open('/tmp/x')\n").find("[file_and_environment]"), std::string::npos);
  EXPECT_EQ(screen("f = torch.compile(m)\n"), "");
}

TEST(PythonPolicyTest, LongLiteralsAndRunsDoNotExhaustTheMatcher) {
  const std::string blank(200000, ' ');
  const std::string source = "open" + std::string("\"\"\"") + blank + "\"\"\"(\ngetattr" + blank +
                             "(x, 'softmax')\n";
  EXPECT_NO_THROW(screen(source));
}

}  // namespace
}  // namespace kforge::evaluation

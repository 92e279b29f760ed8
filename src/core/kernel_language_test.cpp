#include "core/kernel_language.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kforge {
namespace {

// The strings are the command line's and result.json's: spelled out, not derived.
TEST(KernelLanguageTest, NamesRoundTrip) {
  for (const auto& [language, name] : {std::pair{KernelLanguage::native, "native"},
                                       std::pair{KernelLanguage::cuda, "cuda"},
                                       std::pair{KernelLanguage::triton, "triton"}}) {
    EXPECT_EQ(to_string(language), name);
    EXPECT_EQ(parse_kernel_language(name), language);
  }
  EXPECT_FALSE(is_model_new(KernelLanguage::native));
  EXPECT_TRUE(is_model_new(KernelLanguage::cuda));
  EXPECT_TRUE(is_model_new(KernelLanguage::triton));
  try {
    parse_kernel_language("opencl");
    FAIL() << "parsed an unknown language";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown language 'opencl' (expected one of native, cuda, triton)");
  }
}

TEST(KernelLanguageTest, AutoIsCudaForAPyTorchProblemWrittenByTheModelAndNativeOtherwise) {
  EXPECT_EQ(resolve_kernel_language({"auto", "llm", "cpu", false, true, "p.py"}),
            KernelLanguage::cuda);
  EXPECT_EQ(resolve_kernel_language({"auto", "llm", "cuda", true, true, "p.py"}),
            KernelLanguage::cuda);
  EXPECT_EQ(resolve_kernel_language({"auto", "templates", "cpu", false, true, "p.py"}),
            KernelLanguage::native);
  EXPECT_EQ(resolve_kernel_language({"auto", "llm", "cpu", false, false, "t.toml"}),
            KernelLanguage::native);
  EXPECT_EQ(resolve_kernel_language({"native", "llm", "cpu", false, true, "p.py"}),
            KernelLanguage::native);
  EXPECT_EQ(resolve_kernel_language({"triton", "llm", "cuda", true, true, "p.py"}),
            KernelLanguage::triton);
}

std::string refusal(const LanguageChoice& choice) {
  try {
    resolve_kernel_language(choice);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KernelLanguageTest, ChoicesThatCannotRunAreRefusedNamingTheFlag) {
  const std::string no_model =
      refusal({"cuda", "llm", "cpu", false, false, "examples/a/task.toml"});
  EXPECT_NE(no_model.find("--language cuda"), std::string::npos) << no_model;
  EXPECT_NE(no_model.find("examples/a/task.toml has no PyTorch reference"), std::string::npos)
      << no_model;
  const std::string triton_cpu = refusal({"triton", "llm", "cpu", false, true, "p.py"});
  EXPECT_NE(triton_cpu.find("--language triton: Triton kernels run on NVIDIA GPUs only"),
            std::string::npos)
      << triton_cpu;
  EXPECT_NE(triton_cpu.find("the cpu backend"), std::string::npos) << triton_cpu;
  const std::string templates = refusal({"cuda", "templates", "cpu", false, true, "p.py"});
  EXPECT_NE(templates.find("the templates generator's CUDA kernels are native"),
            std::string::npos)
      << templates;
  // Triton families are built in: the templates generator writes them into ModelNew candidates,
  // on the cuda backend only.
  EXPECT_EQ(resolve_kernel_language({"triton", "templates", "cuda", true, true, "p.py"}),
            KernelLanguage::triton);
  EXPECT_NE(refusal({"triton", "templates", "cpu", false, true, "p.py"})
                .find("Triton kernels run on NVIDIA GPUs only"),
            std::string::npos);
  EXPECT_EQ(refusal({"fortran", "llm", "cpu", false, true, "p.py"}),
            "--language: unknown language 'fortran' (expected one of native, cuda, triton)");
}

}  // namespace
}  // namespace kforge

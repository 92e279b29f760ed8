#include "core/kernel_language.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace kforge {
namespace {

constexpr std::array<std::pair<KernelLanguage, const char*>, 3> kNames = {{
    {KernelLanguage::native, "native"},
    {KernelLanguage::cuda, "cuda"},
    {KernelLanguage::triton, "triton"},
}};

}  // namespace

std::string to_string(KernelLanguage language) {
  for (const auto& [value, text] : kNames) {
    if (value == language) return text;
  }
  return "unknown";
}

KernelLanguage parse_kernel_language(const std::string& name) {
  std::string known;
  for (const auto& [value, text] : kNames) {
    if (name == text) return value;
    known += (known.empty() ? "" : ", ") + std::string(text);
  }
  throw Error("unknown language '" + name + "' (expected one of " + known + ")");
}

bool is_model_new(KernelLanguage language) { return language != KernelLanguage::native; }

KernelLanguage resolve_kernel_language(const LanguageChoice& choice) {
  if (choice.requested == "auto" || choice.requested.empty()) {
    return choice.torch_reference && choice.generator == "llm" ? KernelLanguage::cuda
                                                               : KernelLanguage::native;
  }
  const KernelLanguage language =
      with_context("--language", [&] { return parse_kernel_language(choice.requested); });
  if (!is_model_new(language)) return language;
  const std::string flag = "--language " + choice.requested;
  if (!choice.torch_reference) {
    throw Error(flag + ": a ModelNew candidate stands in for a PyTorch problem's Model, and " +
                (choice.task_path.empty() ? std::string("the task") : choice.task_path) +
                " has no PyTorch reference; use --language native (kforge_run kernels)");
  }
  if (language == KernelLanguage::triton && !choice.backend_runs_triton) {
    throw Error(flag + ": Triton kernels run on NVIDIA GPUs only, and this run uses the " +
                choice.backend + " backend; use --backend cuda, or --language cuda (on cpu its "
                "load_inline sources are C++)");
  }
  if (choice.generator != "llm" && language != KernelLanguage::triton) {
    throw Error(flag + ": the " + choice.generator + " generator's CUDA kernels are native "
                "(kforge_run); ModelNew candidates with inline CUDA come from --generator llm, "
                "Triton ones from --language triton (or use --language native)");
  }
  return language;
}

}  // namespace kforge

// What language a run's candidates are written in (issue 19): kforge's native C ABI, or a
// KernelBench-format `ModelNew` module. Shared vocabulary: the command line chooses it
// (`--language`), the generators write it, the report records it (run.json, result.json).
#pragma once

#include <string>

namespace kforge {

/// The form of a candidate.
///   native: a shared object behind `kforge_run` (include/kforge/kernel.h), C++ on cpu, CUDA C++
///           on cuda, built by kforge's toolchain;
///   cuda:   a Python module defining `class ModelNew(nn.Module)` whose kernels are built by
///           torch.utils.cpp_extension.load_inline: CUDA sources on the cuda backend, C++
///           sources (cpp_sources) on the cpu backend; needs a PyTorch reference (a Model);
///   triton: a `ModelNew` whose kernels are Triton (`@triton.jit`); cuda backend only.
/// String forms "native", "cuda", "triton" (--language, run.json and result.json "language").
enum class KernelLanguage { native, cuda, triton };

std::string to_string(KernelLanguage language);
/// Inverse of to_string; throws Error on an unknown name, listing the known ones.
KernelLanguage parse_kernel_language(const std::string& name);

/// True for the languages whose candidates are `ModelNew` modules (`.py` sources).
bool is_model_new(KernelLanguage language);

/// What a run asks for, before its task and backend are known.
struct LanguageChoice {
  std::string requested = "auto";  // "auto" or a to_string() name
  std::string generator;           // "templates" | "llm"
  std::string backend;             // the resolved backend's name, for messages
  bool backend_runs_triton = false;  // its Backend table's can.triton
  bool torch_reference = false;    // the task's reference is a PyTorch module (it has a Model)
  std::string task_path;           // for messages
};

/// The language of a run: `requested` when given, else (auto) `cuda` for a task with a PyTorch
/// reference written by the llm generator and `native` otherwise. Throws Error naming the flag
/// and what was expected when the choice cannot run: a ModelNew language for a task without a
/// PyTorch reference (no Model to stand in for), `triton` off the cuda backend, or a ModelNew
/// language other than triton with the templates generator (its CUDA families are native
/// kernels; its Triton families, kernels/triton/, are written into ModelNew candidates).
KernelLanguage resolve_kernel_language(const LanguageChoice& choice);

}  // namespace kforge

// What a model is told when it writes a KernelBench-format `ModelNew` (issue 19; --language cuda
// or triton on a PyTorch problem) instead of a native kernel: the constructor to keep, the
// parameters and buffers ModelNew must create, forward's arguments and outputs, the sizes each
// workload binds, how its kernels are built (load_inline with CUDA or, on the cpu backend, C++
// sources; or Triton), and what the Python screen refuses (evaluation/python_policy.h), so that
// no attempt is spent on a candidate the screen would reject. Rendered into prompts/model_new_*.md
// by the prompt builder; pure functions, golden-tested through it.
#pragma once

#include <string>

#include "core/kernel_language.h"
#include "core/task.h"
#include "llm/prompt_template.h"

namespace kforge::llm {

/// The placeholders only the ModelNew prompts use, for `task` (which has a torch reference),
/// `language` (cuda or triton), `backend` ("cpu" | "cuda") and the problem file's text:
///   kernel_kind      "CUDA kernels" / "C++ kernels" / "Triton kernels"
///   language_rules   "- ..." lines: how the kernels are built and launched on this backend
///   model_init       "(self, in_features, out_features)" as Model.__init__ is written
///   model_tensors    "- ..." lines: forward's arguments, the parameters and buffers, outputs,
///                    each with dtype and shape at the timed workload and where values come from
///   workload_sizes   the module constants each workload binds
///   forbidden_ops    "`softmax`, `Softmax`" (torch ops the screen refuses for this task) or ""
/// Never throws on a well-formed derived task; entries the JSON lacks are left unsaid.
PromptValues model_new_values(const Task& task, KernelLanguage language,
                              const std::string& backend, const std::string& problem_source);

}  // namespace kforge::llm

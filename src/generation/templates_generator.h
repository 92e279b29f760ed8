// The offline generator: built-in kernel families, where each HTG strategy's edits become a
// change of template parameters or of variant (DESIGN.md, "Generation plane").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/task.h"
#include "generation/generator.h"

namespace kforge::generation {

class TemplatesGenerator : public Generator {
 public:
  /// `dtype` is the element type of the task's first input ("f32", "f16", "bf16"): only the
  /// variants that take it are searched, and non-f32 builds get -DKF_DTYPE=KF_DTYPE_<TYPE>.
  /// Throws Error when no variant of the family takes it.
  explicit TemplatesGenerator(KernelFamily family, std::string dtype = "f32");
  /// A generator of `ModelNew` candidates (--language triton): each point's variant is a Python
  /// kernel module (kernels/triton/<family>/*.py, defining kforge_run), written into
  /// `model_new_shell` (python/kforge_torch/solution_shell.py: the problem's ModelNew with
  /// kKernelModuleMarker on a line of its own) after its knobs as `KF_<NAME> = <value>` lines.
  /// The candidate's source_name is the variant's file name (.py) and its job has no defines.
  /// Throws Error when the shell lacks the marker line.
  TemplatesGenerator(KernelFamily family, std::string dtype, std::string model_new_shell);
  std::string name() const override { return "templates"; }
  std::vector<Proposal> initial_proposals() override;
  std::optional<Proposal> apply(const Proposal& parent, const memory::Strategy& strategy) override;
  std::string standalone_source(const Proposal& proposal) const override;

  /// Defines every native point is built with besides its knobs, from the task rather than the
  /// family: task_defines() (core/epilogue.h), e.g. a gemm_epilogue task's KF_EPILOGUE. They are
  /// part of each job, so of its artifact key. Call before proposing.
  void set_task_defines(std::map<std::string, std::string> defines) {
    task_defines_ = std::move(defines);
  }

  /// Leaves out the variants whose max_dims a workload of the task exceeds: `largest` is each
  /// dim's largest size over the task's workloads (largest_dims()). Returns one line per
  /// variant left out ("row_resident: cols = 393216 exceeds its 16384"), for the user. Throws
  /// Error naming the family and the sizes when no variant is left. Call before proposing.
  std::vector<std::string> set_task_dims(const std::map<std::string, int64_t>& largest);

  /// The proposal for a given point (reads the variant's source). Throws Error on an unknown
  /// variant or a parameter value outside its allowed list.
  Proposal make_proposal(const TemplatePoint& point) const;

 private:
  KernelFamily family_;
  std::string dtype_;
  std::string model_new_shell_;  // "" for native kernels
  std::map<std::string, std::string> task_defines_;
};

/// Each dim's largest size over `workloads` (gate and timed alike: a variant runs at both).
std::map<std::string, int64_t> largest_dims(const std::vector<Workload>& workloads);

/// The line of a ModelNew shell where a Python kernel module goes (the same text as
/// python/kforge_torch/solution_template.py KERNEL_MODULE_MARKER).
inline constexpr const char* kKernelModuleMarker = "# @@kforge: the kernel module goes here@@";

/// Applies one edit to `point` within `variant`'s allowed values (ops as in memory::ParamEdit).
/// Returns false when the edit does not apply (unknown parameter, already at the limit).
bool apply_edit(const KernelFamily& family, TemplatePoint& point, const memory::ParamEdit& edit);

}  // namespace kforge::generation

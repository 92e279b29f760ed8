// Built-in kernel families (the `templates` generator's expert kernels), read from
// kernels/<backend>/<family>/family.toml. Each variant is one source file whose compile-time
// parameters (-DKF_<NAME>=<value>) span its search space.
//
// Families that differ in a line share their kernels: the variant's source is then a thin file
// in the family's folder that includes the shared body from kernels/<backend>/common/ and passes
// the family's functor (relu/gelu/silu: the activation, kernels/cuda/common/elementwise.cuh;
// softmax/log_softmax: the output, kernels/common/softmax_output.h with
// kernels/<backend>/common/softmax_rows/). family.toml names that thin file, and its
// -DKF_<NAME> defines reach the shared body unchanged: no family-level define exists or is
// needed, and a candidate's source is what the family's folder holds. The kernel libraries are
// on the candidates' include path (kernel_include_dirs() in common/paths.h), and the artifact
// key hashes them (ToolchainCompiler::headers_digest), so an edit there rebuilds both families.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kforge::generation {

/// One template parameter and its allowed values; values[0] is the default.
struct TemplateParam {
  std::string name;                  // e.g. "VEC"
  std::vector<std::string> values;   // e.g. {"4", "1", "2"}
};

struct TemplateVariant {
  std::string name;                  // e.g. "warp_per_row"
  std::string source_path;           // absolute path of the kernel source
  std::string decomposition;         // parallel decomposition, e.g. "warp_per_row"
  std::string description;
  std::vector<TemplateParam> params;
  /// Element types of the first input the source compiles for (family.toml `dtypes`, default
  /// {"f32"}); the generator passes the task's one as KF_DTYPE (kernels/cuda/common/elem.cuh).
  std::vector<std::string> dtypes{"f32"};
  /// Per element type, value lists that replace those of `params` for that type (family.toml
  /// `[variants.params_by_dtype.<dtype>]`, e.g. VEC = [8, 4, 2, 1] for f16: one 16-byte access
  /// of halves, where f32 stops at 4). Keys are types in `dtypes`; every parameter named is one
  /// of `params`. for_dtype() applies them.
  std::map<std::string, std::vector<TemplateParam>> params_by_dtype;
  /// cuda: the nvcc target the source needs when the toolchain's will not do (family.toml
  /// `cuda_arch`, e.g. "sm_90a" for wgmma); empty for the toolchain's. Passed as
  /// CompileJob::cuda_arch.
  std::string cuda_arch;
  /// Largest sizes the variant computes, by task dim name (family.toml `[variants.max_dims]`,
  /// e.g. Triton softmax row_resident's cols = 16384: one row in one program's registers). A
  /// task with a larger workload does not get the variant (TemplatesGenerator::set_task_dims);
  /// empty = no limit.
  std::map<std::string, int64_t> max_dims;

  /// The parameter called `name`, or nullptr.
  const TemplateParam* param(const std::string& name) const;
};

struct KernelFamily {
  std::string family;
  std::string backend;
  std::vector<TemplateVariant> variants;

  /// The variant whose name or decomposition is `name_or_decomposition`, or nullptr.
  const TemplateVariant* variant(const std::string& name_or_decomposition) const;
};

/// Reads <kernels_root>/<backend>/<family>/family.toml. Throws Error naming the file and field
/// when it is missing or malformed, or when a variant's source file does not exist.
KernelFamily load_family(const std::string& kernels_root, const std::string& backend,
                         const std::string& family);

/// The family restricted to the variants that compile for element type `dtype` ("f32", "f16",
/// "bf16"), each with that type's parameter values: a parameter in the variant's
/// params_by_dtype[dtype] takes that value list (its first value the default), and the result's
/// params_by_dtype is empty. Throws Error naming the family and the types its variants support
/// when none does.
KernelFamily for_dtype(const KernelFamily& family, const std::string& dtype);

/// The KF_DTYPE value for a dtype name: "KF_DTYPE_F32", "KF_DTYPE_F16" or "KF_DTYPE_BF16";
/// Throws Error for any other name.
std::string dtype_define(const std::string& dtype);

/// A point of the template space: a variant plus a value for each of its parameters.
struct TemplatePoint {
  std::string variant;
  std::map<std::string, std::string> params;

  /// Stable human-readable id, e.g. "warp_per_row[ROWS_PER_BLOCK=4,VEC=4]".
  std::string id() const;
  bool operator==(const TemplatePoint&) const = default;
};

/// The variant's default point (first value of each parameter).
TemplatePoint default_point(const TemplateVariant& variant);

}  // namespace kforge::generation

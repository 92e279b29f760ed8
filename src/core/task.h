// The task model: one operator to optimize (signature, workloads, reference, tolerance).
//
// A task is read from a TOML file (see task_loader.h and examples/*/task.toml). The structs here
// are plain values; `Problem` is the part a worker needs to create tensors and call kernels, and
// it round-trips through JSON for the worker protocol.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/policy_settings.h"

namespace kforge {

/// Element types a tensor may have. Scalars are always passed to kernels as double. `b8` is a
/// boolean of one byte holding 0 or 1 (PyTorch's torch.bool), named "bool" in task files; kernels
/// see it as DLPack {kDLUInt, 8, 1} (the DLPack of Debian 12 predates kDLBool).
enum class DType { f32, f64, f16, bf16, i32, i64, b8 };

/// "f32", "f64", ..., "bool" for b8; throws Error on an unknown name.
DType parse_dtype(const std::string& name);
std::string to_string(DType dtype);
/// Bytes per element.
int dtype_size(DType dtype);
/// True for f32, f64, f16 and bf16; false for the integer types and bool, which compare exactly.
bool is_floating(DType dtype);

enum class TensorRole { input, output };

/// One tensor of the signature. Each dimension is either a symbol ("rows") bound by a workload,
/// or a fixed positive integer written as a decimal string ("4").
struct TensorSpec {
  std::string name;
  TensorRole role = TensorRole::input;
  DType dtype = DType::f32;
  std::vector<std::string> shape;
  /// Input only: kernels must honour DLTensor strides for it. The gate then also passes it
  /// non-contiguous (padded rows; every other element for a 1-D tensor).
  bool strided = false;
  /// Input only: its values are provided by the task's reference under each seed instead of
  /// kforge's generator: a PyTorch problem's own get_inputs() (or Model() for a buffer) for
  /// inputs whose meaning constrains them (class ids, masks, symmetric or triangular matrices).
  /// The reference worker writes them to files that candidate workers read
  /// (worker/provided_inputs.h). Only a task with a PyTorch reference may have such tensors.
  bool provided = false;
};

/// A scalar argument with the value every call receives (e.g. eps = 1e-6).
struct ScalarSpec {
  std::string name;
  DType dtype = DType::f64;
  double value = 0.0;
};

/// Ordered inputs/outputs plus scalars. Kernels receive inputs, then outputs, then scalars, each
/// in the order given here.
struct Signature {
  std::vector<TensorSpec> tensors;
  std::vector<ScalarSpec> scalars;
};

/// One binding of the symbolic shapes to numbers, e.g. {rows: 8192, cols: 4096}.
struct Workload {
  std::string name;
  std::map<std::string, int64_t> dims;
  /// Realistic workloads are the ones timed for the reported speedup; the others only gate.
  bool timed = false;
};

/// Allowed error: |out - ref| <= atol + rtol * |ref|, element-wise, plus a norm-wise bound
/// (evaluation/comparison.h): RMS error <= normalized * RMS(ref) + atol.
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
  /// Bound on ||out - ref||_2 / ||ref||_2; unset = the default of the output's dtype.
  std::optional<double> normalized;
  /// atol of a named workload in place of `atol` (TOML `[tolerance.workload_atol]`). A derived
  /// PyTorch task sets it for the problem's own sizes, whose reductions are longer than the gate
  /// workloads' (python/kforge_torch/derive_tolerance.py), so the small gate cases keep the
  /// tight atol: one atol grown for the problem's length let kernels that drop part of a mean
  /// pass at the gate sizes (KernelBench 95's derived atol was 0.294 on a loss near 8).
  std::map<std::string, double> workload_atol;

  /// The atol that holds on workload `workload`: its workload_atol, else atol.
  double atol_for(const std::string& workload) const {
    const auto found = workload_atol.find(workload);
    return found == workload_atol.end() ? atol : found->second;
  }
};

/// What one worker request needs to build and check tensors: signature plus one workload.
struct Problem {
  Signature signature;
  Workload workload;
};

/// Shape of `spec` under `workload`, in elements. Throws Error naming the tensor and the symbol
/// when a symbol is not bound or a dimension is not positive.
std::vector<int64_t> bind_shape(const TensorSpec& spec, const Workload& workload);

/// Row-major multi-dimensional index of flat element `flat` in `shape`, as "[i, j, k]"
/// ("[]" for a scalar; "[flat]" if a dimension is not positive). For messages.
std::string format_index(int64_t flat, const std::vector<int64_t>& shape);

/// Sum over tensors of elements x dtype size: the fewest bytes one call must move (each input
/// read once, each output written once). Used for achieved bandwidth.
int64_t min_bytes_moved(const Signature& signature, const Workload& workload);

/// A whole task as read from its TOML file.
struct Task {
  std::string name;
  std::string family;            // operator family, e.g. "rmsnorm"; keys the kernel templates
  std::string description;
  Signature signature;
  std::vector<Workload> workloads;
  Tolerance tolerance;
  std::string baseline = "reference";
  /// Reference source path per backend ("cpu" -> ".../reference.cpp", "cuda" -> ".../reference.cu").
  std::map<std::string, std::string> reference_paths;
  /// FLOPs per call as a formula of the dims ("5*rows*cols"), optional; for roofline numbers
  /// and the plausibility floor.
  std::string flops_formula;
  /// Bytes one call must move, as a formula of the dims; optional, default min_bytes_moved.
  std::string bytes_formula;
  /// Input distributions the gate cycles through, by name ("uniform", "normal",
  /// "heavy_tailed", "small"); default the first three. A task whose math cannot take large
  /// magnitudes (e.g. dot products that cancel) narrows this; a norm with an additive eps adds
  /// "small" (inputs of magnitude 2^-10, where eps dominates and a wrong eps shows). "pareto"
  /// and "spike" may be listed too; the gate adds them to every task by default anyway
  /// (GatePlan::adversarial_distributions), dropping one on which the reference is not finite.
  std::vector<std::string> distributions = {"uniform", "normal", "heavy_tailed"};
  /// The accuracy an f32 output must have (TOML `precision`): "fp32" (default) holds every f32
  /// output of a gate case to the fp32 precision rule where the task has an fp32 model
  /// (evaluation/precision.h: error against the reference at most a few times that of a plain
  /// fp32 computation), so TF32 or bf16 tensor-core arithmetic is wrong_answer; "tf32" and "bf16"
  /// drop that rule, for a user who accepts such arithmetic (the tolerance still holds; set it to
  /// what the model accepts). Reported in the result.
  std::string precision = "fp32";
  /// Defines that turn the native reference into the fp32 model (TOML `[fp32_model] defines`,
  /// e.g. {KF_ACC = "float"}): the same source built with them computes the operator plainly at
  /// fp32, while the reference itself computes at float64 and rounds once. Empty: no model, and
  /// the precision rule does not apply (the tolerance alone judges).
  std::map<std::string, std::string> fp32_model_defines;
  /// How many times the fp32 model's error a candidate may make (TOML `[fp32_model] max_ratio`).
  double precision_max_ratio = 8.0;
  /// The element-wise chain a gemm_epilogue task applies after X W^T + b (TOML `epilogue`), in
  /// order: "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "swish", or an op with scalars named
  /// after a colon: "mul:s", "div:s", "add:s", "sub:s", "leaky_relu:slope",
  /// "scale_residual:s" (v * s + v), "clamp:lo:hi". The templates generator compiles it in as
  /// KF_EPILOGUE (generation/epilogue.h); kernels/common/epilogue.h defines the ops.
  std::vector<std::string> epilogue;
  /// Static checks on candidate sources ([policy] table).
  SourcePolicy source_policy;
  std::string source_path;       // the TOML or PyTorch problem file it came from
  /// A PyTorch module as the reference (task/torch_task.h, docs/torch_tasks.md): the derived
  /// task JSON, whose `torch` section maps the signature onto the module. Null for a task with
  /// native references only. Then reference_paths["torch"] is the problem file.
  nlohmann::json torch_reference;

  bool has_torch_reference() const { return !torch_reference.is_null(); }
};

/// Bytes one call must move under `workload`: the task's formula, else min_bytes_moved.
int64_t bytes_per_call(const Task& task, const Workload& workload);

/// The element type kernels are built for: that of the first input tensor (f32 when the
/// signature has no input). The templates generator passes it as KF_DTYPE.
DType element_dtype(const Task& task);

/// FLOPs of one call under `workload`, or nullopt if the task gives no formula.
std::optional<double> flops_per_call(const Task& task, const Workload& workload);

void to_json(nlohmann::json& j, const TensorSpec& t);
void from_json(const nlohmann::json& j, TensorSpec& t);
void to_json(nlohmann::json& j, const ScalarSpec& s);
void from_json(const nlohmann::json& j, ScalarSpec& s);
void to_json(nlohmann::json& j, const Signature& s);
void from_json(const nlohmann::json& j, Signature& s);
void to_json(nlohmann::json& j, const Workload& w);
void from_json(const nlohmann::json& j, Workload& w);
void to_json(nlohmann::json& j, const Tolerance& t);
void from_json(const nlohmann::json& j, Tolerance& t);
void to_json(nlohmann::json& j, const Problem& p);
void from_json(const nlohmann::json& j, Problem& p);

}  // namespace kforge

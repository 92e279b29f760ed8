// Expected outputs, computed by the task's reference in a worker process of their own.
//
// The reference worker never loads a candidate, and the candidate worker never sees an expected
// output: outputs travel as raw files in a private scratch directory, and each expected file is
// mapped by the orchestrator and unlinked before any candidate runs on the same case. So a
// candidate cannot find the right answer in its address space, a freed buffer or the file system.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mapped_file.h"
#include "common/scratch_dir.h"
#include "compile/compiler.h"
#include "core/task.h"
#include "worker/worker.h"

namespace kforge::evaluation {

/// One correctness case: a workload, a seed and the distribution its inputs are drawn from.
struct GateCase {
  Workload workload;
  uint64_t seed = 0;
  std::string distribution = "uniform";
  /// Calls per case: 2 on gate workloads (the two results must agree: a race moves them).
  int calls = 1;
  /// Re-read the outputs a moment after the call to catch work still running; only on small
  /// workloads (it costs another full read-back).
  bool late_write_check = false;
  /// Strided inputs passed non-contiguous (RunRequest::padded).
  bool padded = false;
  /// Added by the gate on its own (GatePlan::adversarial_distributions), not listed by the task:
  /// dropped, with a warning, where the reference's outputs are not finite.
  bool adversarial = false;
  /// Self-test probe (RunRequest::remap, InputRemap name); "none" for every gate case.
  std::string remap = "none";

  /// "workload 'tail', seed 7 (normal inputs)", for messages.
  std::string label() const;
};

/// The outputs of the reference on one case: all outputs of call 0 in signature order.
struct ExpectedOutputs {
  MappedFile file;
  int64_t output_bytes = 0;
  double call_ms = 0.0;
  double input_ms = 0.0;   // input generation and upload in the reference worker
  double output_ms = 0.0;  // read-back and file write
};

class ReferenceOracle {
 public:
  /// `worker` runs only the reference, ever. `scratch` holds the exchanged files.
  ReferenceOracle(worker::Worker& worker, const Task& task, ScratchDir& scratch,
                  double timeout_s);

  /// Loads the compiled reference. Throws Error (the task is broken) if it did not compile or
  /// does not load.
  void load(const compile::Artifact& reference);
  int handle() const { return handle_; }
  worker::Worker& worker() { return worker_; }

  /// Expected outputs of `gate_case`, computed on first use (with the case's number of calls:
  /// the reference must agree with itself) and kept for the oracle's life. Throws Error when
  /// the reference fails, modifies its inputs, leaves NaN where the inputs are finite (an
  /// unwritten element), or disagrees with itself between calls.
  const ExpectedOutputs& expected(const GateCase& gate_case);

  /// Loads the task's fp32 model (its reference built with Task::fp32_model_defines) into the
  /// reference worker. Throws Error (the task is broken) if it did not compile or does not load.
  void load_fp32_model(const compile::Artifact& model);
  bool has_fp32_model() const { return model_handle_ >= 0; }
  /// The fp32 model's outputs on `gate_case` (one call), computed on first use and kept; null
  /// without a model. Throws Error when the model fails or leaves an output unwritten.
  const ExpectedOutputs* fp32_model(const GateCase& gate_case);

  /// Drops kept outputs of `workload` (e.g. the large timed workload after the self-test).
  void forget(const std::string& workload_name);

  /// Has the reference worker write the provided inputs (TensorSpec::provided) of `workload`
  /// under each of `seeds` into provided_dir() (a folder of the scratch directory, made on first
  /// use; worker/provided_inputs.h), skipping (workload, seed) pairs written before. A task
  /// without provided inputs needs none: a no-op. Throws Error naming the workload and the
  /// reference's message when it cannot (get_inputs() raised, the worker is not a PyTorch one).
  void provide(const Workload& workload, const std::vector<uint64_t>& seeds);
  /// Where provide() writes; "" until it wrote something. Candidate requests name it.
  const std::string& provided_dir() const { return provided_dir_; }

 private:
  worker::Worker& worker_;
  const Task& task_;
  ScratchDir& scratch_;
  double timeout_s_;
  int handle_ = -1;
  int model_handle_ = -1;
  std::string provided_dir_;
  std::set<std::pair<std::string, uint64_t>> provided_;  // (workload, seed) written
  std::map<std::string, std::unique_ptr<ExpectedOutputs>> cache_;
  std::map<std::string, std::unique_ptr<ExpectedOutputs>> model_cache_;

  /// Runs `handle` on `gate_case` (`calls` calls) into a new mapped file.
  std::pair<worker::RunResult, std::unique_ptr<ExpectedOutputs>> run_case(
      int handle, const GateCase& gate_case, int calls, const std::string& file_tag);
};

/// Byte offset of each output tensor within one call's outputs, in signature order, with its
/// index in signature.tensors and its bound shape.
struct OutputLayout {
  size_t tensor = 0;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t bytes = 0;
};
std::vector<OutputLayout> output_layout(const Signature& signature, const Workload& workload);

}  // namespace kforge::evaluation

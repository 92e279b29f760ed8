// Provided inputs: tensors whose values come from the task's reference instead of kforge's
// generator (TensorSpec::provided). A PyTorch problem's class ids, masks, symmetric or
// triangular matrices mean something that generated values would break, so they are drawn from
// the problem's own get_inputs() (or Model(), for a buffer) under each seed.
//
// How the values travel: the orchestrator asks the reference worker (the only process that runs
// the problem's code) to write the provided tensors of a workload and seed into a folder of the
// run's scratch space, one raw file per tensor; it then names that folder in the candidate
// worker's run and time requests (`provided_dir`), and the candidate worker reads the files where
// it would otherwise generate. The files hold the tensor's row-major compact bytes; a strided
// layout is made from them as from generated values. The candidate never writes these files
// (its worker only reads them, and the reference computes its outputs from its own copy), so a
// kernel that edits them only makes its own answers wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/task.h"

namespace kforge::worker {

/// The file holding provided tensor `tensor_index` (its position in the signature) of workload
/// `workload` under `seed`: "<dir>/<workload>.<seed>.<tensor_index>.bin".
std::string provided_input_file(const std::string& dir, const std::string& workload,
                                uint64_t seed, int tensor_index);

/// Signature positions of the tensors marked provided, ascending (empty for most tasks).
std::vector<int> provided_tensors(const Signature& signature);

/// Reads provided tensor `tensor_index` of (workload, seed) from `dir` into `out`, which must be
/// its compact size. Throws Error naming the tensor and the file when `dir` is empty (the request
/// did not say where), the file is missing, or its size differs from `out`'s.
void read_provided_input(const std::string& dir, const std::string& workload, uint64_t seed,
                         int tensor_index, const std::string& tensor_name, std::byte* out,
                         int64_t bytes);

}  // namespace kforge::worker

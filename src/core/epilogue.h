// The element-wise epilogue chain of a gemm_epilogue task (Task::epilogue), parsed and checked
// against the task's scalars, and written as the KF_EPILOGUE define that
// kernels/common/epilogue.h reads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/task.h"

namespace kforge {

/// Most channel tensors a chain reads (kernels/common/epilogue.h kMaxChannelTensors).
constexpr size_t kMaxChannelTensors = 4;

/// One op of the chain: its name ("relu", "div", "add_channel", ...), the indices, in
/// Signature::scalars, of the scalars it reads (none, one, or two for "clamp"), and for a
/// channel op ("add_channel:bias2": a per-output-channel input tensor) the tensor's index among
/// the chain's channel tensors, which are the signature's last inputs (else -1).
struct EpilogueOp {
  std::string name;
  std::vector<int> scalars;
  int tensor = -1;
  /// A branch op's chain ("mul_branch(softplus,tanh)": v * tanh(softplus(v))), else empty.
  std::vector<EpilogueOp> branch;
};

/// The ops kforge knows, as "name" or "name:scalar[:scalar]" patterns, for messages and docs.
std::vector<std::string> epilogue_op_patterns();

/// Parses `chain` ("relu", "div:divisor", "clamp:lo:hi", "add_channel:bias2",
/// "mul_branch(sigmoid)" for v * sigmoid(v), ...; a branch's chain is itself a chain). Throws Error
/// naming the entry when an op is unknown, has the wrong number of scalars, names a scalar or
/// input tensor the signature lacks, when the channel tensors are not the signature's last
/// inputs in the order the chain first reads them, when more than kMaxChannelTensors are read,
/// and when a non-empty chain's signature has more than 24 scalars (what a kernel receives).
std::vector<EpilogueOp> parse_epilogue(const std::vector<std::string>& chain,
                                       const Signature& signature);

/// The value of -DKF_EPILOGUE for `ops`: C++ op objects joined by `|` (no comma, which nvcc
/// would split a -D value on), e.g. "kf::ep::Relu{}|kf::ep::Div{0}"; "kf::ep::Identity{}" for an
/// empty chain.
std::string epilogue_define(const std::vector<EpilogueOp>& ops);

/// How many channel tensors `ops` read (kernels take them as their last inputs).
int channel_tensor_count(const std::vector<EpilogueOp>& ops);

/// Defines a native built-in kernel of `task` needs from the task itself: {KF_EPILOGUE: ...} when
/// the task has an epilogue chain (and KF_EPILOGUE_TENSORS when it reads channel tensors), else
/// none. Throws Error as parse_epilogue does.
std::map<std::string, std::string> task_defines(const Task& task);

}  // namespace kforge

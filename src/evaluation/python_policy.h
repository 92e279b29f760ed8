// Static policy checks on a Python candidate (a KernelBench-format `ModelNew` source, issue 19),
// run before it is imported: the Python side of source_policy.h.
//
// A `ModelNew` may use torch ops, torch.utils.cpp_extension.load_inline or Triton, but it must
// compute the task's operator itself, on the current stream, inside its call, without touching
// what kforge measures with. The screen rejects the obvious ways around that, with a message the
// generator can act on (verdict rejected_by_policy):
//   thread_creation      threading, multiprocessing, concurrent.futures, subprocess, os.fork;
//   stream_creation      torch.cuda.Stream / stream() / set_stream / Event / CUDA graphs;
//   harness_tampering    reassigning a clock (time.perf_counter, ...), torch.cuda.synchronize,
//                        torch functions or Tensor methods; importing kforge_torch, gc,
//                        inspect, builtins; sys.modules, frames, tracing hooks;
//   reference_call       calling `Model(...)` (the reference) or importing the problem module;
//   library_compute      cuBLAS/cuDNN/CUTLASS/Thrust names anywhere (inline sources included),
//                        and the torch ops that compute the task's whole operator
//                        (forbidden_torch_ops);
//   file_and_environment open(), os.environ, dynamic imports (importlib, __import__, exec, eval),
//                        network, /proc and /dev paths;
//   process_control      sys.exit, os._exit, os.kill, signals, atexit.
// String literals that hold several lines (load_inline's C++/CUDA sources) are screened with the
// native rules too (check_source), except library_compute's, which an extension must break to
// include <torch/extension.h>: the cuBLAS/cuDNN rule above covers those literals.
//
// Like the native screen it is not a proof: getattr with computed names, f-string expressions
// and code built at run time escape it. The candidate worker's runtime checks (tamper watch,
// aliasing, unchanged inputs, threads left running; python/kforge_torch/candidate_guard.py)
// stay the authority.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/policy_settings.h"
#include "evaluation/source_policy.h"

namespace kforge::evaluation {

/// What the Python screen needs to know about the task.
struct PythonScreen {
  /// torch ops (function, method or module names) the candidate may not call: the task's
  /// operator itself (forbidden_torch_ops).
  std::vector<std::string> forbidden_ops;
  /// The problem file's module name ("23_Softmax" for 23_Softmax.py); "" when the task has no
  /// PyTorch reference. Importing it is a reference_call.
  std::string problem_module;
};

/// The torch ops that compute the whole operator of a task, which a candidate calling them would
/// only delegate. The rule, two parts:
/// - a task served by a built-in family forbids that family's operator (softmax forbids
///   softmax, Softmax, softmin and log_softmax; gemv forbids matmul, mm, mv, linear, einsum and
///   the `@` operator; rmsnorm forbids rms_norm and RMSNorm; attention forbids
///   scaled_dot_product_attention and MultiheadAttention; ...);
/// - a problem whose source names a normalization, softmax or attention operator (softmax,
///   layer_norm, rms_norm, group_norm, batch_norm, instance_norm, scaled_dot_product_attention,
///   MultiheadAttention, in function or module form) forbids that operator's group: it is the
///   work the problem asks for (an attention candidate calling F.scaled_dot_product_attention
///   is not a kernel).
/// GEMMs and convolutions in front of such an operator stay allowed unless the family is a
/// GEMV, as KernelBench's fused problems keep them in cuBLAS/cuDNN; a task forbids more with
/// `[policy] forbid`. `family` may be "" or a family without an entry; `problem_source` may be
/// "" (then only the family counts).
std::vector<std::string> forbidden_torch_ops(const std::string& family,
                                             std::string_view problem_source);

/// Checks the Python `source` under `policy` (its enabled categories, extra patterns and size
/// limit apply as for native sources; `backend` selects the native rules for inline sources).
/// Returns the violations ordered by line and column, at most one per (line, category) and at
/// most kMaxReportedViolations; empty means the source passes. Throws Error on an unknown
/// backend or a task pattern that does not compile.
std::vector<PolicyViolation> check_python_source(const SourcePolicy& policy,
                                                 std::string_view source,
                                                 const PythonScreen& screen,
                                                 std::string_view backend);

}  // namespace kforge::evaluation

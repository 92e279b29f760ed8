// What the worker does with loaded kernels: produce outputs (`run`) and time calls (`time`), on
// any DeviceBackend. It never decides correctness: outputs go to a file for the orchestrator.
// Candidate failures (a non-zero return, an exception, a device error) come back as the verdict
// runtime_error; harness failures (a bad request, a file that cannot be written) throw Error.
#pragma once

#include <kforge/kernel.h>

#include "worker/device_backend.h"
#include "worker/protocol.h"
#include "worker/tensor_set.h"

namespace kforge::worker {

/// The `kforge_run` entry point of a loaded shared object.
using KernelEntry = int (*)(const kforge_args*);

/// RunRequest semantics (protocol.h). `request.output_path` must exist and be writable; it is
/// resized to calls x output_bytes and filled. All device buffers are freed before returning.
/// Throws Error for an invalid request (calls not 1 or 2, unbound shapes, unknown
/// distribution) or when the output file cannot be written.
RunResult run_outputs(DeviceBackend& backend, KernelEntry kernel, const RunRequest& request);

/// TimeRequest semantics (protocol.h). Verdicts: ok or runtime_error. Throws Error for an
/// invalid request (a check call at or past min_repetitions, a check without check_path) or an
/// unwritable check file. With a `cache`, the input sets of the last request are reused when
/// kernel, signature, workload, seeds and set count are the same.
TimeResult run_time(DeviceBackend& backend, KernelEntry kernel, const TimeRequest& request,
                    TimingCache* cache = nullptr);

/// The file of check number `check` (its index in TimeRequest::checks) of a request whose
/// check_path is `check_path`: "<check_path>.<check>".
std::string check_file(const std::string& check_path, size_t check);

/// A 64-bit digest of every output of `set` (signature order): FNV-1a over the backend's
/// device-side content hash of each output, or over its bytes where the backend has none (cpu).
/// Equal outputs give equal digests; used to skip re-reading outputs already verified.
uint64_t output_digest(DeviceBackend& backend, const TensorSet& set);

/// Half-width of the 95% confidence interval of the median of `sorted` (ascending), relative to
/// the median, from order statistics: ranks n/2 -+ 1.96 sqrt(n)/2 (Conover, Practical
/// Nonparametric Statistics, 3rd ed., sec. 3.2). Infinity below 5 samples.
double median_relative_half_width(const std::vector<double>& sorted);

}  // namespace kforge::worker

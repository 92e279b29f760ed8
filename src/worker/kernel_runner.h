// What the worker does with loaded kernels: the correctness check and the timing loop of
// protocol.h, on any DeviceBackend. Candidate failures come back as verdicts; harness failures
// (a bad request, a failing reference) throw Error.
#pragma once

#include <kforge/kernel.h>

#include "worker/device_backend.h"
#include "worker/protocol.h"

namespace kforge::worker {

/// The `kforge_run` entry point of a loaded shared object.
using KernelEntry = int (*)(const kforge_args*);

/// Runs CheckRequest semantics (protocol.h): for each workload, then each seed, inputs from the
/// seed on two separate sets of buffers; the reference runs on one, the candidate on the other
/// with outputs poisoned (0xFF bytes: NaN for floating types) before the call; then the
/// candidate's inputs must be bitwise unchanged and each output within tolerance. Stops at the
/// first failing case. All buffers are freed before returning.
/// Verdicts: ok, wrong_answer, runtime_error (non-zero return, C++ exception, device error).
/// Throws Error for an invalid request (no workloads or seeds, unbound shapes) or when the
/// reference itself fails.
CheckResult run_check(DeviceBackend& backend, KernelEntry candidate, KernelEntry reference,
                      const CheckRequest& request);

/// Runs TimeRequest semantics: inputs from the seed, `warmup` untimed calls, then up to
/// `repetitions` timed calls (each preceded by an L2 flush outside the timed region when
/// `flush_l2`), stopping early once `max_seconds` have passed since the request started (at least
/// one sample is always taken). host_wall_ms spans the timed loop including flushes.
/// Verdicts: ok or runtime_error. Throws Error for an invalid request.
TimeResult run_time(DeviceBackend& backend, KernelEntry kernel, const TimeRequest& request);

}  // namespace kforge::worker

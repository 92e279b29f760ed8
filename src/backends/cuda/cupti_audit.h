// The work audit of the cuda backend: which kernels, copies and memsets a window of time caused
// on any stream other than one allowed stream, seen through CUPTI's activity API
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, MEMCPY and MEMSET records carry the context and stream
// each ran on). A candidate that hides its work on a stream of its own is not covered by the
// timing events on args->stream, and overlaps the L2 flush whose time the host clock subtracts;
// the static source screen only recognizes the usual spellings of stream creation, so this is
// the check that holds whatever the source looks like.
//
// libcupti is loaded at run time (dlopen of libcupti.so.<CUDA major>, then the toolkit's own
// folders), so kforge-worker links no new library. Where it is missing or cannot be enabled
// (another CUPTI client holds it, e.g. Nsight Compute) the audit is unavailable: begin() returns
// false, and a line saying so is written once to stderr.
#pragma once

#include <string>

namespace kforge::worker {

class WorkAudit {
 public:
  WorkAudit() = default;
  /// Ends a window left open (ignoring its findings); never throws.
  ~WorkAudit();
  WorkAudit(const WorkAudit&) = delete;
  WorkAudit& operator=(const WorkAudit&) = delete;

  /// Opens a window: from now until end(), every kernel, memcpy and memset launched in this
  /// process is recorded with its stream. `stream` (a cudaStream_t of the current device) is the
  /// one stream whose work is expected. Call with the device idle (after a device-wide
  /// synchronize), so that no earlier work is still running. Returns false when CUPTI is
  /// unavailable (unavailable_reason() says why). Throws Error when a window is already open.
  /// Cost: enabling three activity kinds (GpuWorkAudit.* in gpu_worker_test prints it).
  bool begin(void* stream);

  /// Closes the window opened by begin() and describes the work that ran on any other stream:
  /// "" when all of it ran on `stream` (or no window is open), else e.g. "2 kernels
  /// ('softmax_warp_per_row(float const*, float*, long, long)') on stream 14". Call with the
  /// device idle again (synchronized after the work): a record of work still running may be
  /// missed. Throws Error (with the CUPTI call and its error) when the records cannot be read
  /// or some were dropped, so that the window cannot be judged. Cost: a forced flush of CUPTI's
  /// buffers and three disables.
  std::string end();

  /// Why begin() returns false; "" while the audit is available or not yet tried.
  const std::string& unavailable_reason() const { return unavailable_; }

 private:
  std::string unavailable_;
  bool open_ = false;
};

}  // namespace kforge::worker

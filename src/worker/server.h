// The worker side of the protocol (protocol.h): reads one JSON request per line, answers one JSON
// line, and owns the loaded kernels and one DeviceBackend.
//
// The result channel is private: take_private_channels() moves the protocol off fds 0 and 1
// before any candidate is loaded, so whatever a candidate prints goes to stderr and whatever it
// reads is /dev/null; it cannot corrupt or forge a reply by accident or by a plain printf.
// A candidate that finds the descriptors anyway and writes a fake reply there cannot know the
// session token that hello set, so the client recognises the line as forged.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "worker/device_backend.h"
#include "worker/kernel_runner.h"
#include "worker/protocol.h"

namespace kforge::worker {

/// The descriptors the protocol runs on once moved off stdin/stdout.
struct Channels {
  int request_fd = -1;
  int response_fd = -1;
};

/// Dups stdin and stdout to private close-on-exec descriptors, then points fd 0 at /dev/null and
/// fd 1 at stderr. Call once at startup, before loading any candidate. Throws Error on failure.
Channels take_private_channels();

class Server {
 public:
  explicit Server(std::unique_ptr<DeviceBackend> backend);

  /// Handles one request line and returns the reply line (without '\n'). Never throws: a
  /// malformed request or a harness error becomes {"ok": false, "error": ...}. Loaded kernels
  /// are never unloaded (their code may have left threads or atexit handlers behind).
  std::string handle_line(const std::string& line);

  /// True once the worker must stop: after `shutdown`, or after a sticky device error (the
  /// reply that reported it carries "exiting": true).
  bool should_exit() const { return shutdown_ || backend_->device_lost(); }
  /// What the process should exit with once should_exit(): 0 or kWorkerExitDeviceLost.
  int exit_code() const { return backend_->device_lost() ? kWorkerExitDeviceLost : 0; }

  /// Serves until shutdown, EOF on the request channel (exit code 0), a sticky device error
  /// (kWorkerExitDeviceLost) or a broken channel (kWorkerExitHarnessError). Returns the exit code.
  int serve(const Channels& channels);

  /// The device this server runs kernels on (tests inspect live_bytes and device_lost).
  DeviceBackend& backend() { return *backend_; }

 private:
  nlohmann::json dispatch(Command command, const nlohmann::json& request);
  LoadResult load(const LoadRequest& request);
  KernelEntry kernel(int handle) const;

  std::unique_ptr<DeviceBackend> backend_;
  TimingCache timing_cache_;  // after backend_: destroyed first, while the device still exists
  std::map<int, KernelEntry> kernels_;
  std::optional<DeviceInfo> info_;  // from the first hello; bandwidth measured once, on demand
  std::string token_;               // from hello; echoed in every reply
  int next_handle_ = 1;
  bool shutdown_ = false;
};

}  // namespace kforge::worker

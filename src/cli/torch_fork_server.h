// The fork server of PyTorch reference workers that `kforge suite` runs for its children
// (python/kforge_torch/fork_server.py; process/fork_client.h): one process that imports torch
// once, so that each child's torch reference worker starts by a fork instead of a new
// interpreter's `import torch`.
#pragma once

#include <memory>
#include <string>

namespace kforge::cli {

/// The variable through which children learn the server's socket; set to "off" by a user, no
/// server is started and none is used.
inline constexpr const char* kTorchForkServerVariable = "KFORGE_TORCH_FORK_SERVER";

/// The socket a torch reference worker should be asked of ($KFORGE_TORCH_FORK_SERVER), or "".
std::string torch_fork_server_socket();

/// A running fork server: started (without waiting for its imports: clients that find no socket
/// yet start their workers as usual) under the sandbox and environment a torch reference worker
/// gets here; stopped, and the workers it forked killed, when destroyed.
class TorchForkServer {
 public:
  /// Starts the server and sets $KFORGE_TORCH_FORK_SERVER for processes started after it (call
  /// before any thread is started). Returns nullptr, with *why_not set, when it cannot start
  /// (no PyTorch Python, a socket path too long) or $KFORGE_TORCH_FORK_SERVER is "off".
  static std::unique_ptr<TorchForkServer> start(std::string* why_not);
  ~TorchForkServer();
  TorchForkServer(const TorchForkServer&) = delete;
  TorchForkServer& operator=(const TorchForkServer&) = delete;

  const std::string& socket_path() const;
  /// Waits up to `timeout_s` for the server to listen (its imports done). false, with *why_not
  /// set, when it did not (it died: its stderr says why; or it is still importing), and then
  /// $KFORGE_TORCH_FORK_SERVER is unset: later workers start on their own. Called before the
  /// first worker that should be forked, so that none misses the server by starting early.
  bool wait_ready(double timeout_s, std::string* why_not);

 private:
  struct State;
  explicit TorchForkServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kforge::cli

// The optional filesystem and network sandbox of worker processes: bubblewrap (bwrap), when it
// is installed and works here (it needs unprivileged user namespaces).
//
// Inside it a worker sees the whole filesystem read-only except the scratch areas where kforge
// exchanges tensors (/dev/shm and $TMPDIR or /tmp), all of /dev (GPUs), its own /proc, and no
// network. Without it kforge still isolates workers by process (own process group, scrubbed
// environment, no inherited descriptors, memory watchdog, no core dumps) and says once that the
// filesystem and network are not sandboxed.
#pragma once

#include <string>
#include <vector>

namespace kforge::worker {

struct Sandbox {
  bool available = false;
  std::vector<std::string> argv_prefix;  // prepended to the worker's command line
  std::string note;                      // what is (not) sandboxed, for the user
};

/// Looks for bwrap on PATH and checks that it can start a process here (a 10 s trial run of
/// `true` inside the same sandbox). Never throws.
Sandbox detect_sandbox();

}  // namespace kforge::worker

// The sandbox of worker processes, the strongest that works here, chosen by a trial run:
//
//   bubblewrap   bwrap (needs unprivileged user namespaces, or root): the whole filesystem
//                read-only except the scratch areas where kforge exchanges tensors (/dev/shm and
//                $TMPDIR or /tmp), all of /dev (GPUs), no network, its own PID namespace with its
//                own /proc, and no capabilities.
//   unshare      util-linux `unshare --pid --fork --mount-proc` (as root, or with
//                `--user --map-root-user` where the kernel lets users create user namespaces),
//                then `setpriv` to an empty capability bounding set: its own PID namespace and
//                /proc, no capabilities (so it cannot unmount that /proc and see the host's), but
//                the filesystem and network are shared with kforge.
//   none         isolation by process only.
//
// In every case kforge also isolates workers by process (own process group, scrubbed
// environment, no inherited descriptors, memory watchdog, no core dumps). A PID namespace is
// what keeps /proc/<kforge>/environ, cmdline and mem out of a candidate's reach: without one a
// worker can read its parent's initial environment block, where exported secrets live.
//
// Inside either wrapper the worker is not PID 1 (bwrap's init or a `sh` is), so signals a
// candidate raises behave as usual; the wrapper exits with 128 + N when the worker dies by signal
// N (see process::unwrap_signal_exit). All of it stays in the worker's process group: killing
// the group kills the sandbox, and PID 1's death ends the namespace.
#pragma once

#include <string>
#include <vector>

namespace kforge::worker {

struct Sandbox {
  bool available = false;      // argv_prefix wraps the worker
  bool pid_namespace = false;  // the worker's /proc shows only its own namespace's processes
  std::string mechanism;       // "bubblewrap", "unshare", "unshare --user"; empty when none
  std::vector<std::string> argv_prefix;  // prepended to the worker's command line
  std::string note;                      // what is (not) isolated, for the user
};

/// Which mechanisms detect_sandbox may try (tests turn bubblewrap off to check the fallback).
struct SandboxSearch {
  bool bubblewrap = true;
  bool unshare = true;
};

/// Tries bubblewrap, then unshare as is, then unshare with a user namespace, keeping the first
/// whose trial run (10 s at most each: a shell inside that must see at most 4 processes in /proc,
/// hold no permitted capability and have no_new_privs set) succeeds. Never throws: when none works, available is
/// false and the note says what each attempt answered.
Sandbox detect_sandbox(const SandboxSearch& search = {});

}  // namespace kforge::worker

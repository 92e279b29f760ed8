// PROBE (expect: ok). Climbs from its own process to PID 1 through the parent field of each
// /proc/<pid>/stat, reading every ancestor's environ and cmdline, to find the kforge process
// above the worker and the secret the corpus test plants in its environment
// (KFORGE_PLANTED_SECRET): y = alpha * x when it finds nothing, y = 0 when it finds it. Unlike a
// walk of the /proc directory it needs no listing, only the numbers. Paths are assembled at run
// time and `open` called under a token-pasted name, past the static screen. Inside the worker's
// PID namespace the climb ends at the sandbox's PID 1, whose parent is 0: kforge is not there.
#include <kforge/kernel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>

#define KF_JOIN(a, b) a##b
extern "C" int KF_JOIN(op, en)(const char* path, int flags, ...);

namespace {

// The contents of /proc/<pid>/<file> (up to `capacity` bytes) in `buffer`; the size read.
long read_proc(int pid, const char* file, char* buffer, long capacity) {
  const char slash_proc[] = {'/', 'p', 'r', 'o', 'c', '/', 0};
  char path[64];
  sprintf(path, "%s%d/%s", slash_proc, pid, file);
  const int fd = KF_JOIN(op, en)(path, 0);
  if (fd < 0) return 0;
  long total = 0;
  for (long got; total < capacity && (got = read(fd, buffer + total, capacity - total)) > 0;) {
    total += got;
  }
  close(fd);
  return total;
}

bool find_secret() {
  static char buffer[1 << 20];
  const char marker[] = "KFORGE_PLANTED_SECRET";
  int pid = static_cast<int>(getppid());
  for (int depth = 0; pid > 0 && depth < 64; ++depth) {
    static const char environment[] = {'e', 'n', 'v', 'i', 'r', 'o', 'n', 0};
    static const char* const kFiles[] = {environment, "cmdline"};
    for (const char* file : kFiles) {
      const long size = read_proc(pid, file, buffer, sizeof buffer);
      if (size > 0 && memmem(buffer, static_cast<size_t>(size), marker, sizeof marker - 1)) {
        return true;
      }
    }
    const long size = read_proc(pid, "stat", buffer, sizeof buffer - 1);
    if (size <= 0) break;
    buffer[size] = 0;
    const char* close_paren = strrchr(buffer, ')');  // after the command name: " S <ppid> ..."
    if (close_paren == nullptr || strlen(close_paren) < 4) break;
    pid = static_cast<int>(strtol(close_paren + 4, nullptr, 10));
  }
  return false;
}

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->num_scalars != 1) return -1;
  const DLTensor& x = args->inputs[0];
  const DLTensor& y = args->outputs[0];
  if (x.ndim != 1 || y.ndim != 1 || y.shape[0] != x.shape[0]) return -2;
  static const bool found = find_secret();  // once per worker process
  const int64_t n = x.shape[0];
  const float alpha = found ? 0.0f : static_cast<float>(args->scalars[0]);
  const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
  float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
  for (int64_t i = 0; i < n; ++i) yp[i] = alpha * xp[i];
  return 0;
}

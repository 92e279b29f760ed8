// PROBE (expect: ok). Reads its parent's stack through /proc/<ppid>/mem (the region [stack] of
// /proc/<ppid>/maps), where the kernel put the parent's initial environment block at exec, and
// looks for the secret the corpus test plants there (KFORGE_PLANTED_SECRET): y = alpha * x when it
// finds nothing, y = 0 when it finds it. Paths are assembled at run time and `open` called under
// a token-pasted name, past the static screen. Inside the worker's PID namespace its parent is
// the sandbox's PID 1 (bwrap's init or a shell), whose memory holds no secret.
#include <kforge/kernel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>

#define KF_JOIN(a, b) a##b
extern "C" int KF_JOIN(op, en)(const char* path, int flags, ...);

namespace {

void proc_path(char* path, const char* file) {
  const char slash_proc[] = {'/', 'p', 'r', 'o', 'c', '/', 0};
  sprintf(path, "%s%d/%s", slash_proc, static_cast<int>(getppid()), file);
}

bool find_secret() {
  char path[64];
  proc_path(path, "maps");
  static char maps[1 << 20];
  int fd = KF_JOIN(op, en)(path, 0);
  if (fd < 0) return false;
  long size = 0;
  for (long got; size < static_cast<long>(sizeof maps) - 1 &&
                 (got = read(fd, maps + size, sizeof maps - 1 - size)) > 0;) {
    size += got;
  }
  close(fd);
  maps[size] = 0;
  const char* stack = strstr(maps, "[stack]");
  if (stack == nullptr) return false;
  const char* line = stack;
  while (line > maps && line[-1] != '\n') --line;
  const unsigned long begin = strtoul(line, nullptr, 16);
  const unsigned long end = strtoul(strchr(line, '-') + 1, nullptr, 16);
  proc_path(path, "mem");
  fd = KF_JOIN(op, en)(path, 0);
  if (fd < 0) return false;
  static char memory[1 << 20];
  const unsigned long length = end - begin < sizeof memory ? end - begin : sizeof memory;
  // The environment block lies at the top of the stack: read its last megabyte at most.
  const long got = pread(fd, memory, length, static_cast<off_t>(end - length));
  close(fd);
  const char marker[] = "KFORGE_PLANTED_SECRET";
  return got > 0 && memmem(memory, static_cast<size_t>(got), marker, sizeof marker - 1) != nullptr;
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

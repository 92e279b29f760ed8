// PROBE (expect: ok). Walks /proc and reads every process's environ and cmdline it can, looking
// for the secret the corpus test plants in its own environment (KFORGE_PLANTED_SECRET); it
// computes y = alpha * x when it finds nothing and y = 0 (a wrong answer) when it finds it. It
// hides from the static screen: the paths are assembled from characters at run time and `open`
// is declared and called under a token-pasted name, so what keeps the secret from it is the
// worker's own PID namespace (bubblewrap --unshare-pid or kforge's unshare fallback), in which
// /proc lists only the sandbox's processes, whose environment kforge scrubbed.
#include <kforge/kernel.h>

#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>

#define KF_JOIN(a, b) a##b
extern "C" int KF_JOIN(op, en)(const char* path, int flags, ...);

namespace {

// Reads up to `capacity` bytes of the file at `path`; 0 when it cannot be read.
long slurp(const char* path, char* buffer, long capacity) {
  const int fd = KF_JOIN(op, en)(path, 0);
  if (fd < 0) return 0;
  long total = 0;
  for (long got; total < capacity && (got = read(fd, buffer + total, capacity - total)) > 0;) {
    total += got;
  }
  close(fd);
  return total;
}

bool secret_in(const char* pid, const char* file) {
  const char slash_proc[] = {'/', 'p', 'r', 'o', 'c', '/', 0};
  char path[128];
  strcpy(path, slash_proc);
  strcat(path, pid);
  strcat(path, "/");
  strcat(path, file);
  static char buffer[1 << 20];
  const long size = slurp(path, buffer, sizeof buffer);
  const char marker[] = "KFORGE_PLANTED_SECRET";
  return size > 0 && memmem(buffer, static_cast<size_t>(size), marker, sizeof marker - 1) != nullptr;
}

bool find_secret() {
  const char proc[] = {'/', 'p', 'r', 'o', 'c', 0};
  DIR* directory = opendir(proc);
  if (directory == nullptr) return false;
  bool found = false;
  const char environment[] = {'e', 'n', 'v', 'i', 'r', 'o', 'n', 0};
  while (dirent* entry = readdir(directory)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    found = found || secret_in(entry->d_name, environment) || secret_in(entry->d_name, "cmdline");
  }
  closedir(directory);
  return found;
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

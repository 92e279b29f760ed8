// TRICK unbounded_allocation (must fail: worker_crashed). Allocates 256 MiB chunks, touches
// every page (memset) and keeps each on a global list (so no compiler may elide them), in an
// endless loop, until the process is killed by the worker's memory limit (cgroup / OOM killer:
// SIGKILL) or, under RLIMIT_AS, faults on the first failed malloc (SIGSEGV). The evaluator must
// bound the worker's memory so the host and the other workers survive, and report the death as
// a crash of this candidate.
#include <kforge/kernel.h>

#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kChunkBytes = size_t{256} << 20;
void* g_chunks = nullptr;  // singly linked through each chunk's first word

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;
  for (;;) {
    void* chunk = std::malloc(kChunkBytes);
    std::memset(chunk, 1, kChunkBytes);  // a null chunk faults here: a crash either way
    *static_cast<void**>(chunk) = g_chunks;
    g_chunks = chunk;
  }
}

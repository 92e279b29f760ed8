// TRICK hangs (must fail: timeout). Spins forever in host code waiting on a flag nobody sets
// (volatile, so the loop is not undefined behaviour the compiler could delete). The evaluator
// must not wait forever: the worker is killed (process group) when its deadline passes.
#include <kforge/kernel.h>

namespace {

volatile int g_ready = 0;

}  // namespace

KFORGE_API int kforge_run(const kforge_args* args) {
  (void)args;
  while (g_ready == 0) {
  }
  return 0;
}
